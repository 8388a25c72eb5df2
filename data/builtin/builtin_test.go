package builtin

import (
	"bytes"
	"strings"
	"testing"

	"tinygpt/data/builtin/internal/corpusgen"
)

// TestMatchesGenerator fails when corpus.txt and the generator disagree:
// after changing the generator, run `go generate ./data/builtin`.
func TestMatchesGenerator(t *testing.T) {
	want := corpusgen.Generate()
	if !bytes.Equal(Text(), want) {
		t.Fatalf("corpus.txt (%d bytes) differs from the generator's output (%d bytes); run `go generate ./data/builtin`",
			len(Text()), len(want))
	}
}

func TestSize(t *testing.T) {
	if n := len(Text()); n < 700_000 || n > 1_000_000 {
		t.Errorf("corpus is %d bytes, want 700 KB to 1 MB", n)
	}
	if Name == "" || Description == "" {
		t.Error("Name and Description must be set")
	}
}

func TestCharset(t *testing.T) {
	for i, c := range Text() {
		if c != '\n' && (c < ' ' || c > '~') {
			t.Fatalf("byte %d is %q: want printable ASCII or newline only", i, c)
		}
	}
}

func TestLines(t *testing.T) {
	text := string(Text())
	if !strings.HasSuffix(text, "\n") || strings.HasPrefix(text, "\n") {
		t.Error("corpus must end with a newline and not start with a blank line")
	}
	if strings.Contains(text, "\n\n\n") {
		t.Error("documents must be separated by exactly one blank line")
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	distinct := map[string]bool{}
	nonEmpty, run := 0, 1
	for i, l := range lines {
		if len(l) > 80 {
			t.Errorf("line %d is %d bytes long: %q", i+1, len(l), l)
		}
		if l != strings.TrimRight(l, " ") {
			t.Errorf("line %d has trailing spaces: %q", i+1, l)
		}
		if l == "" {
			continue
		}
		nonEmpty++
		distinct[l] = true
		if i > 0 && lines[i-1] == l {
			run++
			if run > 2 {
				t.Errorf("line %d: %q repeated %d times in a row", i+1, l, run)
			}
		} else {
			run = 1
		}
	}
	if r := float64(len(distinct)) / float64(nonEmpty); r < 0.5 {
		t.Errorf("only %.2f of the lines are distinct; the corpus is too repetitive", r)
	}
}

func TestDocuments(t *testing.T) {
	docs := strings.Split(strings.TrimSuffix(string(Text()), "\n"), "\n\n")
	if len(docs) < 500 {
		t.Errorf("only %d documents", len(docs))
	}
	seen := map[string]bool{}
	for _, d := range docs {
		if seen[d] {
			t.Errorf("document repeated: %.60q", d)
		}
		seen[d] = true
	}
}
