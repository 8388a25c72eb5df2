//go:build linux

package gpu

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestIcdDirs(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	got := icdDirs(env(map[string]string{"HOME": "/h"}))
	want := []string{"/h/.config/vulkan/icd.d", "/etc/xdg/vulkan/icd.d", "/etc/vulkan/icd.d",
		"/h/.local/share/vulkan/icd.d", "/usr/local/share/vulkan/icd.d", "/usr/share/vulkan/icd.d"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("default dirs:\n got %q\nwant %q", got, want)
	}
	got = icdDirs(env(map[string]string{"XDG_CONFIG_DIRS": "/a:/b", "XDG_DATA_DIRS": "/d"}))
	want = []string{"/a/vulkan/icd.d", "/b/vulkan/icd.d", "/etc/vulkan/icd.d", "/d/vulkan/icd.d"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("XDG dirs, no HOME:\n got %q\nwant %q", got, want)
	}
}

func TestMissingICD(t *testing.T) {
	none := func(string) string { return "" }
	dir := t.TempDir()
	empty, drivers := filepath.Join(dir, "empty"), filepath.Join(dir, "drivers")
	manifest := filepath.Join(drivers, "lvp_icd.json")
	for _, d := range []string{empty, drivers} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(manifest, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if why := missingICD(none, []string{empty, drivers}); why != "" {
		t.Errorf("a manifest in the second dir: got %q, want none", why)
	}
	why := missingICD(none, []string{empty, filepath.Join(dir, "absent")})
	if !strings.Contains(why, "no Vulkan driver") || !strings.Contains(why, empty) {
		t.Errorf("no manifest: got %q, want it to name the missing driver and the dirs searched", why)
	}
	// VK_DRIVER_FILES replaces the search: a manifest in the dirs does not count then.
	set := func(v string) func(string) string {
		return func(k string) string {
			if k == "VK_DRIVER_FILES" {
				return v
			}
			return ""
		}
	}
	if why := missingICD(set(manifest), nil); why != "" {
		t.Errorf("VK_DRIVER_FILES naming a manifest: got %q, want none", why)
	}
	if why := missingICD(set(filepath.Join(dir, "x.json")), []string{drivers}); !strings.Contains(why, "VK_DRIVER_FILES=") {
		t.Errorf("VK_DRIVER_FILES naming nothing: got %q, want it named", why)
	}
}

// A manifest that cannot work says why, where its file shows it; one that may work says nothing.
func TestBrokenICDs(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	junk := write("junk.json", "not json")
	empty := write("empty.json", "{}")
	gone := write("gone.json", `{"file_format_version": "1.0.0", "ICD": {"library_path": "/no/such/libvulkan_x.so"}}`)
	named := write("named.json", `{"ICD": {"library_path": "libvulkan_lvp.so"}}`) // found by the loader's search
	why := brokenICDs([]string{junk, empty, gone})
	for _, want := range []string{junk + " is not a Vulkan driver manifest", empty + " is not", gone + " names the driver library /no/such/libvulkan_x.so, which does not exist"} {
		if !strings.Contains(why, want) {
			t.Errorf("got %q\nwant it to contain %q", why, want)
		}
	}
	if why := brokenICDs([]string{junk, named}); why != "" {
		t.Errorf("with a manifest that may work: %q", why)
	}
	// VK_DRIVER_FILES names the manifests the loader reads; without it, the dirs' files.
	files := icdManifests(func(k string) string {
		if k == "VK_DRIVER_FILES" {
			return junk + ":" + filepath.Join(dir, "missing.json")
		}
		return ""
	}, []string{dir})
	if !reflect.DeepEqual(files, []string{junk}) {
		t.Errorf("manifests with VK_DRIVER_FILES: %q", files)
	}
	if files := icdManifests(func(string) string { return "" }, []string{dir}); len(files) != 4 {
		t.Errorf("manifests of the dir: %q", files)
	}
}
