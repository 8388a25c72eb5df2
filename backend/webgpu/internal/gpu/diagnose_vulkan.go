//go:build linux || windows

package gpu

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/gogpu/wgpu/hal/vulkan/vk"
)

// noAdapterReason says why the binding found no adapter, when the cause is one a user can mend:
// the Vulkan loader library cannot be loaded, or no Vulkan driver (ICD) is installed; on Linux
// with both in place, how to see why the loader rejected the drivers. It returns "" where it
// cannot tell.
func noAdapterReason() string {
	// The binding loaded the library once already; Init returns that attempt's error.
	if err := vk.Init(); err != nil {
		return fmt.Sprintf("%v: install the Vulkan loader (Debian and Ubuntu: libvulkan1) and your GPU's Vulkan driver", err)
	}
	if runtime.GOOS != "linux" {
		return "" // Windows registers its drivers in the registry
	}
	dirs := icdDirs(os.Getenv)
	if why := missingICD(os.Getenv, dirs); why != "" {
		return why
	}
	if why := brokenICDs(icdManifests(os.Getenv, dirs)); why != "" {
		return why
	}
	// A driver whose own libraries are missing (such as NVIDIA's without libglvnd) is skipped
	// by the loader, which says so only when asked.
	return "Vulkan and a driver manifest are installed but no GPU device was found; VK_LOADER_DEBUG=error,warn shows what the Vulkan loader tried"
}

// nvidiaContainerICD is where NVIDIA's container toolkit puts its Vulkan driver's manifest,
// outside the directories the Vulkan loader searches.
const nvidiaContainerICD = "/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json"

// missingICD reports that no Vulkan driver manifest exists where the Linux Vulkan loader looks
// for one (the files VK_DRIVER_FILES or VK_ICD_FILENAMES name when set, dirs otherwise), or ""
// when one does.
func missingICD(getenv func(string) string, dirs []string) string {
	for _, v := range []string{"VK_DRIVER_FILES", "VK_ICD_FILENAMES"} {
		if list := getenv(v); list != "" {
			for _, f := range filepath.SplitList(list) {
				if _, err := os.Stat(f); err == nil {
					return ""
				}
			}
			return fmt.Sprintf("%s=%s names no existing Vulkan driver manifest", v, list)
		}
	}
	for _, d := range dirs {
		if m, _ := filepath.Glob(filepath.Join(d, "*.json")); len(m) > 0 {
			return ""
		}
	}
	why := "Vulkan is installed but no Vulkan driver is (no manifest in " + strings.Join(dirs, ", ") + ")"
	if _, err := os.Stat(nvidiaContainerICD); err == nil {
		return why + ": NVIDIA's driver manifest is at " + nvidiaContainerICD + "; name it with VK_DRIVER_FILES=" + nvidiaContainerICD
	}
	return why + ": install your GPU's Vulkan driver (NVIDIA's driver has one; Debian's and Ubuntu's mesa-vulkan-drivers has AMD's, Intel's and a software one)"
}

// icdManifests lists the driver manifests the Linux Vulkan loader would read: those that
// VK_DRIVER_FILES or VK_ICD_FILENAMES name when set, else the *.json files of dirs.
func icdManifests(getenv func(string) string, dirs []string) []string {
	var files []string
	for _, v := range []string{"VK_DRIVER_FILES", "VK_ICD_FILENAMES"} {
		if list := getenv(v); list != "" {
			for _, f := range filepath.SplitList(list) {
				if _, err := os.Stat(f); err == nil {
					files = append(files, f)
				}
			}
			return files
		}
	}
	for _, d := range dirs {
		m, _ := filepath.Glob(filepath.Join(d, "*.json"))
		files = append(files, m...)
	}
	return files
}

// brokenICDs says why none of the driver manifests can work, where their files show it: each
// one cannot be read, is not a manifest (JSON naming ICD.library_path), or names by its full
// path a library that does not exist. It returns "" when one of them may work (the loader then
// has its own reasons) or there is none.
func brokenICDs(manifests []string) string {
	var whys []string
	for _, m := range manifests {
		b, err := os.ReadFile(m)
		if err != nil {
			whys = append(whys, fmt.Sprintf("%s cannot be read (%v)", m, err))
			continue
		}
		var icd struct {
			ICD struct {
				LibraryPath string `json:"library_path"`
			} `json:"ICD"`
		}
		if err := json.Unmarshal(b, &icd); err != nil || icd.ICD.LibraryPath == "" {
			whys = append(whys, m+" is not a Vulkan driver manifest (JSON naming ICD.library_path)")
			continue
		}
		if p := icd.ICD.LibraryPath; filepath.IsAbs(p) {
			if _, err := os.Stat(p); err != nil {
				whys = append(whys, fmt.Sprintf("%s names the driver library %s, which does not exist", m, p))
				continue
			}
		}
		return ""
	}
	if len(whys) == 0 {
		return ""
	}
	return "no Vulkan driver manifest is usable: " + strings.Join(whys, "; ")
}

// icdDirs lists the directories the Linux Vulkan loader searches for driver manifests, from
// the XDG base directories and the system's configuration directory.
func icdDirs(getenv func(string) string) []string {
	home := getenv("HOME")
	orDefault := func(v, def string) string {
		if s := getenv(v); s != "" {
			return s
		}
		return def
	}
	var bases []string
	if home != "" {
		bases = append(bases, orDefault("XDG_CONFIG_HOME", filepath.Join(home, ".config")))
	}
	bases = append(bases, filepath.SplitList(orDefault("XDG_CONFIG_DIRS", "/etc/xdg"))...)
	bases = append(bases, "/etc")
	if home != "" {
		bases = append(bases, orDefault("XDG_DATA_HOME", filepath.Join(home, ".local/share")))
	}
	bases = append(bases, filepath.SplitList(orDefault("XDG_DATA_DIRS", "/usr/local/share:/usr/share"))...)
	dirs := make([]string, 0, len(bases))
	for _, b := range bases {
		if b != "" {
			dirs = append(dirs, filepath.Join(b, "vulkan", "icd.d"))
		}
	}
	return dirs
}
