package webgpu

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestWGSLDir checks that a kernel file in the folder TINYGPT_WGSL_DIR names replaces the
// built-in one, in the files that include it too, and that the other files stay built in.
func TestWGSLDir(t *testing.T) {
	dir := t.TempDir()
	gelu, err := shaders.ReadFile("wgsl/gelu.wgsl")
	if err != nil {
		t.Fatal(err)
	}
	const marker = "// a variant of gelu.wgsl"
	if err := os.WriteFile(filepath.Join(dir, "gelu.wgsl"), append([]byte(marker+"\n"), gelu...), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(wgslDirEnv, dir)
	for _, c := range []struct {
		file string
		want bool
	}{{"gelu", true}, {"matmul", true}, {"elementwise", true}, {"layernorm", false}} {
		code, err := kernelSource(c.file, "", 0)
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		if got := strings.Contains(code, marker); got != c.want {
			t.Errorf("%s: holds the variant's text: %v, want %v", c.file, got, c.want)
		}
		own, err := shaders.ReadFile("wgsl/" + c.file + ".wgsl")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(code, string(own)) && c.file != "gelu" {
			t.Errorf("%s: the built-in file's text is missing", c.file)
		}
	}
	// A name there that cannot be read as a file is an error, not the built-in kernel.
	if err := os.Mkdir(filepath.Join(dir, "layernorm.wgsl"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := kernelSource("layernorm", "", 0); err == nil || !strings.Contains(err.Error(), wgslDirEnv) {
		t.Errorf("unreadable variant: err = %v, want one naming %s", err, wgslDirEnv)
	}
	// So is a folder that does not exist: every kernel would be the built-in one.
	t.Setenv(wgslDirEnv, filepath.Join(dir, "missing"))
	if _, err := kernelSource("matmul", "", 0); err == nil || !strings.Contains(err.Error(), wgslDirEnv) {
		t.Errorf("missing folder: err = %v, want one naming %s", err, wgslDirEnv)
	}
}

// Every function of matmul.wgsl's problem section is copied for dual64's second product under
// a name of its own; problemNames must list each (a missing one leaves two functions of one
// name, which no shader compiler takes).
func TestProblemNamesCoverSection(t *testing.T) {
	code, err := wgslFile("matmul")
	if err != nil {
		t.Fatal(err)
	}
	sec := problemSection(code)
	if sec == "" {
		t.Fatal("matmul.wgsl has no problem section")
	}
	defs := regexp.MustCompile(`(?m)^fn (\w+)\(`).FindAllStringSubmatch(sec, -1)
	if len(defs) == 0 {
		t.Fatal("no functions in the problem section")
	}
	for _, d := range defs {
		if !problemNames.MatchString(d[1] + "(") {
			t.Errorf("function %s of matmul.wgsl's problem section is not in problemNames (webgpu.go)", d[1])
		}
	}
	if copy := problem2(code); !strings.Contains(copy, "fn tile64_2(") || strings.Contains(copy, "prm.p1.") {
		t.Error("problem2 did not rename the section for the second product")
	}
}
