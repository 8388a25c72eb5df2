// Command gen writes the built-in corpus, corpus.txt, of package builtin.
//
// Run it from the repository root with `go run ./data/builtin/gen`, or from
// data/builtin with `go generate`. The output is the same on every run and
// every Go version; see corpusgen.Generate.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"tinygpt/data/builtin/internal/corpusgen"
)

func main() {
	// go generate runs us in data/builtin; `go run ./data/builtin/gen`
	// from the repository root runs us there. Write next to builtin.go.
	out := "corpus.txt"
	if _, err := os.Stat("builtin.go"); err != nil {
		out = filepath.Join("data", "builtin", "corpus.txt")
	}
	text := corpusgen.Generate()
	if err := os.WriteFile(out, text, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	fmt.Printf("wrote %s (%d bytes)\n", out, len(text))
}
