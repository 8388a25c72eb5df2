package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"tinygpt/format"
	"tinygpt/gpt"
)

// tinygpt runs a command line and returns its exit status and output.
func tinygpt(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, &env{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb})
	return code, out.String(), errb.String()
}

// trainSmall trains a 3-step model of one layer, width 16 and context 8 on corpus into out.
func trainSmall(t *testing.T, corpus, out string) {
	t.Helper()
	code, stdout, stderr := tinygpt(t, "", "train", "--data", corpus, "--layers", "1", "--d-model", "16", "--ctx", "8",
		"--batch", "2", "--steps", "3", "--eval-every", "0", "--out", out)
	if code != 0 {
		t.Fatalf("train: exit %d\n%s%s", code, stdout, stderr)
	}
}

func writeCorpus(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	for i := 0; b.Len() < 6000; i++ {
		b.WriteString([]string{"the fox runs. ", "a dog sleeps. ", "birds sing at dawn.\n"}[i%3])
	}
	path := filepath.Join(dir, "corpus.txt")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The whole user journey on a small custom model: train, inspect, sample, eval, convert,
// resume, and log JSON.
func TestTrainSampleInspectConvertResume(t *testing.T) {
	dir := t.TempDir()
	corpus := writeCorpus(t, dir)
	model := filepath.Join(dir, "m.tinygpt")
	log := filepath.Join(dir, "log.jsonl")
	size := []string{"--layers", "1", "--d-model", "32", "--ctx", "16", "--batch", "4"}

	code, out, errOut := tinygpt(t, "", append([]string{"train", "--data", corpus, "--steps", "10", "--eval-every", "5",
		"--out", model, "--log-json", log, "--lr", "1e-3"}, size...)...)
	if code != 0 {
		t.Fatalf("train: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"model:   custom (1L d32 1h ctx16 mlp128)", "step 10/10", "done: 10 steps", "sample:"} {
		if !strings.Contains(out, want) {
			t.Errorf("train output lacks %q:\n%s", want, out)
		}
	}
	logText, _ := os.ReadFile(log)
	lines := strings.Split(strings.TrimSpace(string(logText)), "\n")
	var steps, evals, samples int
	for _, l := range lines {
		var ev map[string]any
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		switch ev["event"] {
		case "step":
			steps++
		case "eval":
			evals++
		case "sample": // the final one, printed once, with the summary
			if samples++; ev["step"] != 10.0 || !strings.Contains(out, "sample:\n"+safeText(ev["text"].(string))) || strings.Contains(out, "--- sample at step 10") {
				t.Errorf("the final sample %v, printed as\n%s", ev, out)
			}
		}
	}
	if steps != 10 || evals != 2 || samples != 1 {
		t.Errorf("log has %d steps, %d evals and %d samples, want 10, 2 and 1", steps, evals, samples)
	}

	code, out, _ = tinygpt(t, "", "inspect", model)
	if code != 0 || !strings.Contains(out, "step 10 of 10") || !strings.Contains(out, "resumable") {
		t.Errorf("inspect: exit %d\n%s", code, out)
	}
	code, out, _ = tinygpt(t, "", "inspect", "--json", model)
	if code != 0 || !json.Valid([]byte(out)) {
		t.Errorf("inspect --json: exit %d\n%s", code, out)
	}

	code, out, errOut = tinygpt(t, "", "sample", "--model", model, "--prompt", "the ", "--tokens", "40", "--seed", "1")
	// Not to a terminal, the bytes are the model's, as they are: the prompt, 40 bytes, a newline.
	if code != 0 || !strings.HasPrefix(out, "the ") || len(out) != len("the ")+40+1 || !strings.Contains(errOut, "tokens/s") {
		t.Errorf("sample: exit %d\n%q\n%s", code, out, errOut)
	}
	_, again, _ := tinygpt(t, "", "sample", "--model", model, "--prompt", "the ", "--tokens", "40", "--seed", "1")
	if again != out {
		t.Error("the same seed sampled different text")
	}

	code, out, _ = tinygpt(t, "", "eval", "--model", model)
	if code != 0 || !strings.Contains(out, "bits/byte") {
		t.Errorf("eval: exit %d\n%s", code, out)
	}
	// A corpus whose validation split is shorter than a window has it widened to one, as
	// training does; one too short to split points to --split all.
	short := filepath.Join(dir, "short.txt")
	os.WriteFile(short, []byte(strings.Repeat("abcd ", 8)), 0o644)
	code, out, errOut = tinygpt(t, "", "eval", "--model", model, "--data", short)
	if code != 0 || !strings.Contains(errOut, "shorter than one window of ctx+1 = 17 bytes; it is widened") || !strings.Contains(out, "1 window of 17 bytes") {
		t.Errorf("eval on a short corpus: exit %d\n%s%s", code, out, errOut)
	}
	tiny := filepath.Join(dir, "tiny.txt")
	os.WriteFile(tiny, []byte(strings.Repeat("x", 17)), 0o644)
	code, _, errOut = tinygpt(t, "", "eval", "--model", model, "--data", tiny)
	if code != 1 || !strings.Contains(errOut, "too short for context 16") || !strings.Contains(errOut, "--split all") {
		t.Errorf("eval on a corpus too short to split: exit %d\n%s", code, errOut)
	}
	code, out, _ = tinygpt(t, "", "eval", "--model", model, "--data", short, "--split", "all")
	if code != 0 || !strings.Contains(out, "2 windows of 17 bytes") {
		t.Errorf("eval --split all on a short corpus: exit %d\n%s", code, out)
	}
	code, _, errOut = tinygpt(t, "", "eval", "--model", model, "--glob", "*.txt")
	if code != 1 || !strings.Contains(errOut, "--glob picks files in a directory given with --data") {
		t.Errorf("eval --glob without --data: exit %d\n%s", code, errOut)
	}

	for _, to := range []string{"fp16", "int4", "fp32"} {
		conv := filepath.Join(dir, "m."+to+".tinygpt")
		code, out, errOut = tinygpt(t, "", "convert", "--to", to, model, conv)
		if code != 0 {
			t.Fatalf("convert --to %s: exit %d\n%s%s", to, code, out, errOut)
		}
		code, out, errOut = tinygpt(t, "", "sample", "--model", conv, "--tokens", "20", "--temperature", "0")
		if code != 0 {
			t.Errorf("sample from %s: exit %d %s", to, code, errOut)
		}
	}
	// An existing output is replaced only with --force: IN and OUT swapped by mistake must not
	// turn the checkpoint into a copy of a smaller model.
	before, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	code, _, errOut = tinygpt(t, "", "convert", "--to", "fp32", filepath.Join(dir, "m.int4.tinygpt"), model)
	if after, _ := os.ReadFile(model); code != 1 || !strings.Contains(errOut, "pass --force to replace it") || !bytes.Equal(after, before) {
		t.Errorf("convert onto an existing model without --force: exit %d, %q, the file changed: %v", code, errOut, !bytes.Equal(after, before))
	}
	fp32 := filepath.Join(dir, "m.fp32.tinygpt")
	code, out, errOut = tinygpt(t, "", "convert", "--force", "--to", "fp32", filepath.Join(dir, "m.int4.tinygpt"), fp32)
	if g, err := format.ReadFile(fp32); code != 0 || err != nil || g.M != nil {
		t.Errorf("convert --force onto an existing model: exit %d %s%s; the file: %v", code, out, errOut, err)
	}
	code, _, errOut = tinygpt(t, "", "train", "--resume", filepath.Join(dir, "m.fp16.tinygpt"))
	if code != 1 || !strings.Contains(errOut, "weights only") {
		t.Errorf("resuming an fp16 file: exit %d, %s", code, errOut)
	}

	code, out, errOut = tinygpt(t, "", "train", "--resume", model, "--steps", "14")
	if code != 0 || !strings.Contains(out, "resuming") || !strings.Contains(out, "done: 14 steps") {
		t.Fatalf("resume: exit %d\n%s%s", code, out, errOut)
	}
	f, err := format.ReadFile(model)
	if err != nil || f.Step != 14 {
		t.Fatalf("after resume: step %d, %v", f.Step, err)
	}
	code, _, errOut = tinygpt(t, "", "train", "--resume", model, "--lr", "1")
	if code != 1 || !strings.Contains(errOut, "--lr cannot be changed") {
		t.Errorf("resume with --lr: exit %d, %s", code, errOut)
	}
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short.txt")
	os.WriteFile(short, []byte("tiny text"), 0o644)
	garbage := filepath.Join(dir, "garbage.tinygpt")
	os.WriteFile(garbage, []byte("TGPT\x02\x00\x00\x00\xff\xff\xff\xffxx"), 0o644)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"train", "--stpes", "5"}, 2, "flag provided but not defined: -stpes"},
		{[]string{"train", "--steps", "abc"}, 2, `invalid value "abc" for flag -steps`},
		{[]string{"train", "--steps", "0"}, 1, "--steps must be between 1 and 2147483647"},
		// A model file keeps its step as an int32.
		{[]string{"train", "--steps", "2147483648"}, 1, "--steps must be between 1 and 2147483647"},
		{[]string{"train", "--heads", "5", "--d-model", "48"}, 1, "--heads must divide --d-model 48"},
		{[]string{"train", "--dropout", "1.5"}, 1, "--dropout must be in [0, 1)"},
		{[]string{"train", "--steps", "10", "--warmup", "20"}, 1, "--warmup must not be longer than the run (--steps 10)"},
		{[]string{"train", "--min-lr", "1e-5"}, 1, "--min-lr is the floor of the cosine schedule: add --schedule cosine"},
		{[]string{"train", "--heads", "-1"}, 1, "--heads must be at least 1"},
		{[]string{"train", "--heads", "0"}, 1, "--heads must be at least 1"},
		{[]string{"bench", "--heads", "0"}, 1, "--heads must be at least 1"},
		{[]string{"train", "--schedule", "linear"}, 1, "--schedule must be constant or cosine"},
		{[]string{"train", "--preset", "gigantic"}, 1, `unknown preset "gigantic"`},
		{[]string{"train", "--backend", "tpu"}, 1, `unknown backend`},
		{[]string{"train", "--data", short}, 1, "too short for context 64"},
		{[]string{"train", "--data", filepath.Join(dir, "nope.txt")}, 1, "no such file"},
		{[]string{"train", "--data", dir, "--glob", "*.go"}, 1, `no files matching "*.go"`},
		{[]string{"train", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"sample"}, 1, "--model is required"},
		{[]string{"sample", "--model", garbage}, 1, "exceeds file size"},
		{[]string{"sample", "--model", filepath.Join(dir, "nope.tinygpt")}, 1, "no such file"},
		{[]string{"sample", "--model", short}, 1, "not a .tinygpt file"},
		{[]string{"sample", "--model", garbage, "--top-p", "2"}, 1, "--top-p must be in (0, 1]"},
		{[]string{"inspect"}, 2, "tinygpt inspect: need one model file\nUsage: tinygpt inspect"},
		{[]string{"convert", "--to", "fp16", short, short + "2"}, 1, "not a .tinygpt file"},
		// The target format is checked before the files.
		{[]string{"convert", "--to", "fp8", short, short + "2"}, 1, `--to must be fp32, fp16 or int4, got "fp8"`},
		{[]string{"convert", garbage, garbage}, 1, "--to is required (fp32, fp16 or int4)"},
		{[]string{"bench", "--presets", "nope"}, 1, `unknown preset "nope"`},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"sample", "--model", garbage, "--temperature", "NaN"}, 1, "--temperature must be a number"},
		{[]string{"sample", "--model", garbage, "--tokens", "9223372036854775807"}, 1, "--tokens must be between"},
		{[]string{"train", "--batch", "4611686018427387904", "--ctx", "4"}, 1, "too large"},
		{[]string{"train", "--min-lr", "NaN"}, 1, "--min-lr must be between 0 and --lr"},
		{[]string{"train", "--out", dir}, 1, "is a directory"},
		{[]string{"train", "--out", filepath.Join(dir, "no", "such", "m.tinygpt")}, 1, "the folder " + filepath.Join(dir, "no", "such") + " does not exist"},
		{[]string{"train", "--out", filepath.Join(garbage, "m.tinygpt")}, 1, garbage + " is not a folder"},
		{[]string{"train", "--d-model", "65536", "--layers", "64"}, 1, "of memory, more than this machine's"},
		{[]string{"bench", "--steps", "9223372036854775807"}, 1, "--steps must be between"},
		{[]string{"bench", "--presets", "tiny,small", "--batch", "2"}, 1, "change one preset: name one with --presets"},
		{[]string{"bench", "--d-model", "96", "--heads", "5"}, 1, "--heads must divide --d-model 96"},
		{[]string{"bench", "--ctx", "0"}, 1, "--ctx must be between 1 and"},
		// Nothing but a model file is replaced, and the log never lands on the corpus or the model.
		{[]string{"train", "--steps", "1", "--out", short}, 1, "is not a .tinygpt model file"},
		{[]string{"train", "--steps", "1", "--log-json", short}, 1, "is not a JSON log"},
		{[]string{"train", "--steps", "1", "--log-json", filepath.Join(dir, "m.tinygpt"), "--out", filepath.Join(dir, "m.tinygpt")}, 1, "is the model file --out"},
		{[]string{"train", "--data", short, "--glob", "*.txt"}, 1, "picks files in a folder"},
		// An empty --data is a variable that was not set, not a wish for another text.
		{[]string{"train", "--data", ""}, 1, "--data is empty"},
		{[]string{"train", "--data", "", "--glob", "*.go"}, 1, "--data is empty"},
		{[]string{"eval", "--model", garbage, "--data", ""}, 1, "--data is empty"},
	} {
		code, out, errOut := tinygpt(t, "", c.args...)
		// Letter case aside: the system's own words differ (a missing file is "No such file
		// or directory" under js/wasm).
		if code != c.code || !strings.Contains(strings.ToLower(out+errOut), strings.ToLower(c.want)) {
			t.Errorf("tinygpt %s: exit %d, output %q; want exit %d and %q", strings.Join(c.args, " "), code, out+errOut, c.code, c.want)
		}
	}
	// convert knows a file by what it is, not by its name: a hard link to the input is the input.
	link := filepath.Join(dir, "link.tinygpt")
	if err := os.Link(garbage, link); err == nil {
		if code, _, errOut := tinygpt(t, "", "convert", "--to", "fp16", garbage, link); code != 1 || !strings.Contains(errOut, "input and output are the same file") {
			t.Errorf("convert onto a hard link of its input: exit %d, %q", code, errOut)
		}
	}
	// convert replaces only model files, as train does.
	if code, _, errOut := tinygpt(t, "", "convert", "--to", "fp16", garbage, short); code != 1 || !strings.Contains(errOut, "is not a .tinygpt model file") {
		t.Errorf("convert onto a text file: exit %d, %q", code, errOut)
	}
	if b, _ := os.ReadFile(short); string(b) != "tiny text" {
		t.Errorf("convert onto a text file changed it to %q", b)
	}
	// A symbolic link (or a device, or a pipe) is not replaced by a regular file.
	sym := filepath.Join(dir, "sym.tinygpt")
	if err := os.Symlink(filepath.Join(dir, "target.tinygpt"), sym); err == nil {
		for _, args := range [][]string{{"train", "--steps", "1", "--out", sym}, {"convert", "--to", "fp16", garbage, sym}} {
			code, _, errOut := tinygpt(t, "", args...)
			if fi, err := os.Lstat(sym); code != 1 || !strings.Contains(errOut, "is not a regular file") || err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Errorf("tinygpt %s onto a symbolic link: exit %d, %q; the link %v", strings.Join(args, " "), code, errOut, err)
			}
		}
	}
}

// A diverging run stops with a clear message and leaves only finite checkpoints behind.
func TestDivergingRunKeepsGoodCheckpoint(t *testing.T) {
	dir := t.TempDir()
	corpus := writeCorpus(t, dir)
	model := filepath.Join(dir, "d.tinygpt")
	code, out, errOut := tinygpt(t, "", "train", "--data", corpus, "--layers", "1", "--d-model", "16", "--ctx", "8",
		"--batch", "2", "--lr", "1e30", "--steps", "6", "--checkpoint-every", "1", "--eval-every", "0", "--out", model)
	if code != 1 || !strings.Contains(errOut, "not finite") || !strings.Contains(errOut, "lower --lr") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	// Weights that are not finite after a step whose loss was (a learning rate of 1e39, past
	// float32's range) stop the run at the checkpoint that finds them, not with a warning that
	// the save failed and training goes on.
	code, out, errOut = tinygpt(t, "", "train", "--data", corpus, "--layers", "1", "--d-model", "16", "--ctx", "8",
		"--batch", "2", "--lr", "1e39", "--steps", "6", "--checkpoint-every", "1", "--eval-every", "0", "--out", model+"2")
	if code != 1 || !strings.Contains(errOut, "the model after step 1 is not finite") || !strings.Contains(errOut, "lower --lr") ||
		strings.Contains(out+errOut, "warning") {
		t.Errorf("exit %d\n%s%s", code, out, errOut)
	}
	if f, err := format.ReadFile(model); err == nil {
		for _, w := range f.Weights {
			if w != w {
				t.Fatalf("checkpoint at step %d has NaN weights", f.Step)
			}
		}
	}
}

// A run whose loss climbs far above a random model's is warned about once, and goes on.
func TestDivergenceWarning(t *testing.T) {
	dir := t.TempDir()
	corpus := writeCorpus(t, dir)
	code, out, errOut := tinygpt(t, "", "train", "--data", corpus, "--layers", "1", "--d-model", "16", "--ctx", "8",
		"--batch", "2", "--lr", "10", "--steps", "20", "--out", filepath.Join(dir, "w.tinygpt"))
	if code != 0 || strings.Count(errOut, "the run is diverging") != 1 {
		t.Errorf("exit %d, stderr %q: want exit 0 and one divergence warning\n%s", code, errOut, out)
	}
	code, _, errOut = tinygpt(t, "", "train", "--data", corpus, "--layers", "1", "--d-model", "16", "--ctx", "8",
		"--batch", "2", "--steps", "20", "--out", filepath.Join(dir, "ok.tinygpt"))
	if code != 0 || strings.Contains(errOut, "diverging") {
		t.Errorf("a healthy run: exit %d, stderr %q", code, errOut)
	}
	// A new run over an existing model says that it replaces it.
	code, out, errOut = tinygpt(t, "", "train", "--data", corpus, "--layers", "1", "--d-model", "16", "--ctx", "8",
		"--batch", "2", "--steps", "2", "--out", filepath.Join(dir, "ok.tinygpt"))
	if code != 0 || !strings.Contains(out, "(replacing the model there at the first checkpoint)") {
		t.Errorf("a run over a model: exit %d\n%s%s", code, out, errOut)
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"help", "help"}, {"help", "train"}, {"help", "version"}, {"train", "-h"}, {"sample", "--help"}, {"bench", "-h"}} {
		// Help asked for goes to standard output.
		code, out, errOut := tinygpt(t, "", args...)
		if code != 0 || !strings.Contains(out, "tinygpt") || errOut != "" {
			t.Errorf("tinygpt %v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	_, out, _ := tinygpt(t, "", "train", "-h")
	for _, flag := range []string{"-preset", "-data", "-resume", "-log-json", "-schedule", "(default 0.0003)"} {
		if !strings.Contains(out, flag) {
			t.Errorf("train -h lacks %q", flag)
		}
	}
	_, out, _ = tinygpt(t, "", "help")
	if !strings.Contains(out, "tinygpt version") {
		t.Errorf("the command list lacks version:\n%s", out)
	}
	// A wrong flag's message and the usage after it go to standard error.
	code, out, errOut := tinygpt(t, "", "sample", "--bogus")
	if code != 2 || out != "" || !strings.Contains(errOut, "not defined: -bogus") || !strings.Contains(errOut, "Usage: tinygpt sample") {
		t.Errorf("sample --bogus: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestStdinCorpusAndDefaultName(t *testing.T) {
	dir := t.TempDir()
	old, _ := os.Getwd()
	os.Chdir(dir)
	defer os.Chdir(old)
	text := strings.Repeat("hello there, general reader. ", 40)
	code, out, errOut := tinygpt(t, text, "train", "--data", "-", "--layers", "1", "--d-model", "16", "--ctx", "8", "--steps", "3", "--batch", "2")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "stdin-1L-d16-ctx8.tinygpt")); err != nil {
		t.Errorf("default output name: %v\n%s", err, out)
	}
}

func TestSafeWriter(t *testing.T) {
	var b bytes.Buffer
	w := newSafeWriter(&b)
	for _, c := range []byte("ok \xe2\x82\xac \x1b[2J \xff\r\n\t\xe2\x82") {
		w.WriteByte(c)
	}
	w.Flush()
	want := "ok \u20ac \\x1b[2J \ufffd\r\n\t\ufffd\ufffd"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

// A log that cannot be written (a full disk) is reported once; the training goes on and saves.
func TestLogWriteFailure(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full here")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "m.tinygpt")
	text := strings.Repeat("hello there, general reader. ", 40)
	code, stdout, stderr := tinygpt(t, text, "train", "--data", "-", "--layers", "1", "--d-model", "16", "--ctx", "8",
		"--steps", "3", "--batch", "2", "--out", out, "--log-json", "/dev/full")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	if n := strings.Count(stderr, "warning: --log-json"); n != 1 || !strings.Contains(strings.ToLower(stderr), "no space left") {
		t.Errorf("stderr %q: want one warning naming the full disk", stderr)
	}
	if _, err := format.ReadFile(out); err != nil {
		t.Errorf("model not saved: %v", err)
	}
	code, _, stderr = tinygpt(t, text, "train", "--data", "-", "--steps", "3", "--sample-every", "-1")
	if code != 1 || !strings.Contains(stderr, "--sample-every must not be negative") {
		t.Errorf("--sample-every -1: exit %d, %q", code, stderr)
	}
}

// bench times a custom size as train builds it: the named preset (default small) changed by
// the size flags.
func TestBenchCustomSize(t *testing.T) {
	code, out, errOut := tinygpt(t, "", "bench", "--layers", "1", "--d-model", "32", "--ctx", "8", "--batch", "3",
		"--steps", "1", "--warmup", "0", "--json", "--threads", "1")
	if code != 0 {
		t.Fatalf("bench: exit %d\n%s%s", code, out, errOut)
	}
	var r struct {
		Preset             string
		Params, Batch, Ctx int
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, out)
	}
	want := gpt.Config{Layers: 1, DModel: 32, Heads: gpt.DefaultHeads(32), Ctx: 8, DMlp: 128}
	if r.Preset != "custom" || r.Params != want.NumParams() || r.Batch != 3 || r.Ctx != 8 {
		t.Errorf("bench of a custom size: got %+v, want preset custom, %d params, batch 3, ctx 8", r, want.NumParams())
	}
	// --batch alone keeps the preset's name and shape.
	code, out, errOut = tinygpt(t, "", "bench", "--presets", "tiny", "--batch", "2", "--steps", "1", "--warmup", "0", "--json", "--threads", "1")
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || r.Preset != "tiny" || r.Batch != 2 {
		t.Errorf("bench --presets tiny --batch 2: exit %d, got %+v\n%s%s", code, r, out, errOut)
	}
}

// The command a stopped run prints for resuming names its corpus as the run was given it.
func TestResumeHint(t *testing.T) {
	for _, c := range []struct {
		data, glob string
		stored     bool
		want       string
	}{
		{"corpus.txt", "", true, "tinygpt train --resume m.tinygpt"},
		{"corpus.txt", "", false, "tinygpt train --resume m.tinygpt --data corpus.txt"},
		{"-", "", false, "tinygpt train --resume m.tinygpt --data - (the same text on standard input)"},
		{"src", "*.go", false, "tinygpt train --resume m.tinygpt --data src --glob '*.go'"},
		{"my notes/it's.txt", "", false, `tinygpt train --resume m.tinygpt --data 'my notes/it'\''s.txt'`},
		{"/dev/fd/63", "", false, "tinygpt train --resume m.tinygpt --data <(...) (the same text, from the same command)"},
	} {
		if got := resumeHint("m.tinygpt", c.data, c.glob, c.stored); got != c.want {
			t.Errorf("resumeHint(%q, %q, %v) = %q, want %q", c.data, c.glob, c.stored, got, c.want)
		}
	}
}

// A model file its owner made read-only is not replaced by a resumed run's checkpoints or by
// convert --force (saving renames a new file over it, which the folder would allow).
func TestReadOnlyModelNotReplaced(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("mode bits")
	}
	dir := t.TempDir()
	corpus := writeCorpus(t, dir)
	model := filepath.Join(dir, "m.tinygpt")
	code, out, errOut := tinygpt(t, "", "train", "--data", corpus, "--layers", "1", "--d-model", "16", "--ctx", "8",
		"--batch", "2", "--steps", "2", "--eval-every", "0", "--out", model)
	if code != 0 {
		t.Fatalf("train: exit %d\n%s%s", code, out, errOut)
	}
	if err := os.Chmod(model, 0o444); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(model)
	half := filepath.Join(dir, "m.fp16.tinygpt")
	if code, out, errOut := tinygpt(t, "", "convert", "--to", "fp16", model, half); code != 0 {
		t.Fatalf("convert to a new file: exit %d\n%s%s", code, out, errOut)
	}
	for _, args := range [][]string{
		{"train", "--resume", model, "--steps", "4"},
		{"convert", "--force", "--to", "fp32", half, model},
	} {
		code, out, errOut := tinygpt(t, "", args...)
		if code != 1 || !strings.Contains(errOut, model+" is read-only, and TinyGPT does not replace a read-only model") {
			t.Errorf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	if after, _ := os.ReadFile(model); !bytes.Equal(before, after) {
		t.Error("the read-only model changed")
	}
}

// A corpus that the model file cannot hold (not UTF-8) is named at the start, with what it
// means for resuming.
func TestCorpusNotStoredNote(t *testing.T) {
	dir := t.TempDir()
	corpus := filepath.Join(dir, "bytes.bin")
	b := make([]byte, 4000)
	for i := range b {
		b[i] = byte(i*7) | 0x80 // no NUL, and not UTF-8
	}
	os.WriteFile(corpus, b, 0o644)
	code, out, errOut := tinygpt(t, "", "train", "--data", corpus, "--steps", "1", "--layers", "1", "--d-model", "16",
		"--ctx", "16", "--batch", "2", "--out", filepath.Join(dir, "m.tinygpt"))
	if code != 0 || !strings.Contains(out, "the corpus is not kept in the model file (it is not UTF-8 text): --resume and continuing need --data again") {
		t.Errorf("train on bytes: exit %d\n%s%s", code, out, errOut)
	}
	// inspect says so too, naming the text the header records.
	code, out, errOut = tinygpt(t, "", "inspect", filepath.Join(dir, "m.tinygpt"))
	if code != 0 || !strings.Contains(out, "not stored, only its SHA-256 ("+corpus+", 4,000 bytes, ") ||
		!strings.Contains(out, "--resume and eval need --data with that text") {
		t.Errorf("inspect: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = tinygpt(t, "", "inspect", "--json", filepath.Join(dir, "m.tinygpt"))
	if code != 0 || !strings.Contains(out, `"corpus": "(not stored)"`) {
		t.Errorf("inspect --json: exit %d\n%s%s", code, out, errOut)
	}
	// Without --data, eval and --resume say which text they need.
	code, _, errOut = tinygpt(t, "", "eval", "--model", filepath.Join(dir, "m.tinygpt"))
	if code != 1 || !strings.Contains(errOut, "pass --data with the text it was trained on ("+corpus+", 4,000 bytes)") {
		t.Errorf("eval without --data: exit %d, %q", code, errOut)
	}
	code, _, errOut = tinygpt(t, "", "train", "--resume", filepath.Join(dir, "m.tinygpt"), "--steps", "2")
	if code != 1 || !strings.Contains(errOut, `pass --data with it ("`+corpus+`", 4000 bytes)`) {
		t.Errorf("resume without --data: exit %d, %q", code, errOut)
	}
}

// Files of a folder that are not text are skipped, and the run says which (their names'
// control characters made visible).
func TestSkippedFilesNoted(t *testing.T) {
	dir := t.TempDir()
	writeCorpus(t, dir)
	os.WriteFile(filepath.Join(dir, "b\x1b[31m.bin"), []byte("\x7fELF\x00\x00"), 0o644)
	os.WriteFile(filepath.Join(dir, "empty.txt"), nil, 0o644)
	code, out, errOut := tinygpt(t, "", "train", "--data", dir, "--steps", "1", "--layers", "1", "--d-model", "16",
		"--ctx", "16", "--batch", "2", "--out", filepath.Join(t.TempDir(), "m.tinygpt"))
	want := "note:    skipped 2 files that are not text (binary, UTF-16 or UTF-32) or empty: " + filepath.Join(dir, `b\x1b[31m.bin (binary)`) + ", " + filepath.Join(dir, "empty.txt (empty)")
	if code != 0 || !strings.Contains(out, want) {
		t.Errorf("exit %d\n%s%s\nwant %q", code, out, errOut, want)
	}
}

// Extending a finished cosine run stretches its schedule: the resume says what that does to
// the learning rate; a constant schedule, or the planned total, says nothing.
func TestResumeNotesAMovedSchedule(t *testing.T) {
	dir := t.TempDir()
	corpus := writeCorpus(t, dir)
	size := []string{"--layers", "1", "--d-model", "32", "--ctx", "16", "--batch", "4", "--eval-every", "0"}
	for _, kind := range []string{"cosine", "constant"} {
		model := filepath.Join(dir, kind+".tinygpt")
		code, out, errOut := tinygpt(t, "", append([]string{"train", "--data", corpus, "--steps", "10", "--out", model,
			"--lr", "1e-3", "--schedule", kind}, size...)...)
		if code != 0 {
			t.Fatalf("train: exit %d\n%s%s", code, out, errOut)
		}
		code, out, errOut = tinygpt(t, "", "train", "--resume", model, "--steps", "20", "--eval-every", "0")
		if code != 0 {
			t.Fatalf("resume: exit %d\n%s%s", code, out, errOut)
		}
		// Step 11 of a cosine from 1e-3 to 1e-4 over 20 steps: 1e-4 + 4.5e-4·(1+cos(π·11/20)).
		want := "note:    the cosine schedule now ends at step 20, not 10: step 11's learning rate is 4.80e-04 (the saved schedule: 1.00e-04), falling to 1.00e-04 at step 20"
		if got := strings.Contains(out, want); got != (kind == "cosine") {
			t.Errorf("%s: the note is there: %v, want %v:\n%s", kind, got, kind == "cosine", out)
		}
	}
}

// A name train chooses itself never replaces a model: a second run on the same corpus and size
// writes name-2, a third name-3; --out names the file to replace.
func TestDefaultNameKeepsEarlierModels(t *testing.T) {
	dir := t.TempDir()
	corpus := writeCorpus(t, dir)
	t.Chdir(dir)
	args := []string{"train", "--data", corpus, "--layers", "1", "--d-model", "16", "--ctx", "8", "--batch", "2", "--eval-every", "0"}
	for i, want := range []string{"corpus-1L-d16-ctx8.tinygpt", "corpus-1L-d16-ctx8-2.tinygpt", "corpus-1L-d16-ctx8-3.tinygpt"} {
		steps := fmt.Sprint(3 + i)
		code, out, errOut := tinygpt(t, "", append(args, "--steps", steps)...)
		if code != 0 || !strings.Contains(out, "saving:  "+want+"\n") {
			t.Fatalf("run %d: exit %d, want it saved to %s:\n%s%s", i+1, code, want, out, errOut)
		}
	}
	for i, name := range []string{"corpus-1L-d16-ctx8.tinygpt", "corpus-1L-d16-ctx8-2.tinygpt", "corpus-1L-d16-ctx8-3.tinygpt"} {
		if f, err := format.ReadFile(name); err != nil || f.Step != int32(3+i) {
			t.Errorf("%s: %v, want step %d", name, err, 3+i)
		}
	}
}

// Resuming through a symbolic link writes the model it points to, and the link stays a link.
func TestResumeThroughALink(t *testing.T) {
	dir := t.TempDir()
	corpus := writeCorpus(t, dir)
	real, link := filepath.Join(dir, "real.tinygpt"), filepath.Join(dir, "latest.tinygpt")
	trainSmall(t, corpus, real)
	if err := os.Symlink("real.tinygpt", link); err != nil {
		t.Skip("no symbolic links here:", err)
	}
	code, out, errOut := tinygpt(t, "", "train", "--resume", link, "--steps", "5", "--eval-every", "0")
	if code != 0 {
		t.Fatalf("resume through the link: exit %d\n%s%s", code, out, errOut)
	}
	if f, err := format.ReadFile(real); err != nil || f.Step != 5 {
		t.Errorf("the model the link points to: %v, step %v, want 5", err, f)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link is no longer a link: %v", err)
	}
}

// --init-from without a size takes the model's own; a size given must match it.
func TestInitFromTakesTheModelsSize(t *testing.T) {
	dir := t.TempDir()
	corpus := writeCorpus(t, dir)
	base, tuned := filepath.Join(dir, "base.tinygpt"), filepath.Join(dir, "tuned.tinygpt")
	trainSmall(t, corpus, base)
	code, out, errOut := tinygpt(t, "", "train", "--init-from", base, "--data", corpus, "--steps", "2", "--eval-every", "0", "--out", tuned)
	if code != 0 || !strings.Contains(out, "model:   custom (1L d16 1h ctx8 mlp64)") ||
		!strings.Contains(out, "init:    weights from "+base+" (step 3, fp32); a new run, with its own settings") {
		t.Fatalf("--init-from without sizes: exit %d\n%s%s", code, out, errOut)
	}
	if f, err := format.ReadFile(tuned); err != nil || f.Header.Config.DModel != 16 || f.Step != 2 {
		t.Errorf("the tuned model: %v", err)
	}
	code, _, errOut = tinygpt(t, "", "train", "--init-from", base, "--data", corpus, "--preset", "tiny", "--steps", "2", "--out", tuned)
	if code != 1 || !strings.Contains(errOut, "pick the same --preset or sizes") {
		t.Errorf("--init-from with another size: exit %d, %s", code, errOut)
	}
}

// A run whose checkpoints the disk has no room for is warned before it starts.
func TestDiskFullWarned(t *testing.T) {
	defer func(f func(string) (int64, bool)) { diskFree = f }(diskFree)
	diskFree = func(string) (int64, bool) { return 3 << 20, true }
	dir := t.TempDir()
	out := filepath.Join(dir, "m.tinygpt")
	code, stdout, stderr := tinygpt(t, "", "train", "--preset", "small", "--steps", "1", "--eval-every", "0", "--out", out)
	if code != 0 || !strings.Contains(stderr, "warning: the disk holding "+out+" has 3.0 MB free, less than a checkpoint's 5.0 MB") {
		t.Errorf("exit %d\n%s%s", code, stdout, stderr)
	}
	diskFree = func(string) (int64, bool) { return 1 << 40, true }
	if code, stdout, stderr := tinygpt(t, "", "train", "--preset", "small", "--steps", "1", "--eval-every", "0", "--out", out); code != 0 || strings.Contains(stderr, "warning: the disk") {
		t.Errorf("with room: exit %d\n%s%s", code, stdout, stderr)
	}
}
