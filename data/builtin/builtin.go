// Package builtin holds the default training corpus of tinygpt: about
// 850 KB of plain English text (printable ASCII and newlines only) that is
// embedded in the binary, so `tinygpt train` works with no --data flag.
//
// The text is not copied from anywhere. It is written procedurally by the
// deterministic generator in internal/corpusgen (templates and word lists
// invented for tinygpt, a fixed seed and its own splitmix64): little
// stories set in an invented town, letters, recipes, rhymes, short plays,
// ship's logs and diaries, fables and lists of simple facts. Documents are
// separated by one blank line; inside a document there are no blank lines.
//
// corpus.txt is the generator's output, checked in. After changing the
// generator, run `go generate ./data/builtin` (or `go run ./data/builtin/gen`
// from the repository root); the package test fails when the two disagree.
package builtin

import _ "embed"

//go:generate go run ./gen

// Name is the name under which the built-in corpus is known, e.g. in
// logs and in the metadata of a trained model.
const Name = "builtin"

// Description is a one-line summary of the built-in corpus.
const Description = "generated tales of the town of Pellbrook: stories, letters, recipes, rhymes, plays, logs, fables and facts (~850 KB ASCII)"

//go:embed corpus.txt
var corpus []byte

// Text returns the built-in corpus. The slice is shared, not copied:
// callers must not modify it.
func Text() []byte { return corpus }
