package gpt

import (
	"sort"
	"strings"
	"testing"
)

// For a backend that stores long tensors in pieces, the flat layout keeps every parameter
// within one piece, without overlaps, and refuses a parameter longer than a piece.
func TestParamTableSegments(t *testing.T) {
	c := Config{Layers: 3, DModel: 64, Heads: 2, Ctx: 32, DMlp: 256}
	_, plain, _ := paramTable(c, 0)
	const seg = 20480 // a multiple of SliceAlign, above the largest parameter (64×256)
	ps, flat, err := paramTable(c, seg)
	if err != nil {
		t.Fatal(err)
	}
	if flat <= plain || flat <= 2*seg {
		t.Fatalf("flat size %d with pieces of %d (%d without): want padding and at least three pieces", flat, seg, plain)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].Offset < ps[j].Offset })
	end := 0
	for _, p := range ps {
		if p.Offset%64 != 0 && p.Stride == 0 {
			t.Errorf("%s at %d is not aligned", p.Name, p.Offset)
		}
		if p.Offset/seg != (p.Offset+p.span()-1)/seg {
			t.Errorf("%s [%d, %d) crosses a piece's end", p.Name, p.Offset, p.Offset+p.span())
		}
		if p.Stride == 0 && p.Offset < end {
			t.Errorf("%s at %d overlaps the parameter before it (ending at %d)", p.Name, p.Offset, end)
		}
		end = max(end, p.Offset+p.span())
	}
	if end > flat {
		t.Errorf("parameters end at %d, past the flat size %d", end, flat)
	}
	if _, _, err := paramTable(c, 8192); err == nil || !strings.Contains(err.Error(), "token_embedding.weight has 16384 elements") {
		t.Errorf("pieces smaller than the token embedding: %v, want an error naming it", err)
	}
	if LargestParam(c) != 64*256 {
		t.Errorf("LargestParam %d, want %d", LargestParam(c), 64*256)
	}
}
