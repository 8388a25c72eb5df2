package gpt

import (
	"sort"
	"strings"
	"testing"

	"tinygpt/backend/cpu"
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

// At long contexts the CPU attention's T×T scratch dominates, and the estimate counts it (a
// context of 100,000 bytes once ran the machine out of memory past a 0.2 GB estimate).
func TestMemoryEstimateCountsAttentionScratch(t *testing.T) {
	c := Config{Layers: 2, DModel: 48, Heads: 3, Ctx: 100000, DMlp: 192}
	scores := int64(c.Ctx) * int64(c.Ctx) * 4 // one thread's scores, in bytes
	if got := MemoryEstimate(c, 1, c.Ctx, false); got < scores {
		t.Errorf("inference at ctx %d: estimate %d bytes, below one score matrix's %d", c.Ctx, got, scores)
	}
	if got := MemoryEstimate(c, 1, c.Ctx, true); got < 2*scores {
		t.Errorf("training at ctx %d: estimate %d bytes, below the scores and their gradient's %d", c.Ctx, got, 2*scores)
	}
}

// Upload and Download move a model's flat tensors a chunk at a time: with chunks far shorter
// than the parameters (so that rows of the q, k and v column blocks and whole parameters
// straddle chunk ends), values go out and come back unchanged, and the padding between
// parameters is zero.
func TestMoveInChunks(t *testing.T) {
	defer func(n int) { moveChunk = n }(moveChunk)
	c := Config{Layers: 2, DModel: 24, Heads: 3, Ctx: 8, DMlp: 96}
	for _, chunk := range []int{64, 192, 1 << 20} {
		moveChunk = chunk
		be := cpu.New()
		m, err := New(be, c)
		if err != nil {
			t.Fatal(err)
		}
		ones := make([]float32, m.FlatSize())
		for i := range ones {
			ones[i] = 1
		}
		be.Upload(m.WeightsTensor(), ones) // so that padding left as it was shows
		w := make([]float32, c.NumParams())
		for i := range w {
			w[i] = float32(i + 2)
		}
		if err := m.SetWeights(w); err != nil {
			t.Fatal(err)
		}
		for i, v := range m.Weights() {
			if v != w[i] {
				t.Fatalf("chunks of %d: weight %d came back as %v, want %v", chunk, i, v, w[i])
			}
		}
		flat := make([]float32, m.FlatSize())
		be.Download(flat, m.WeightsTensor(), 0)
		used := make([]bool, len(flat))
		for _, p := range m.Params {
			p.runs(0, len(flat), func(file, at, n int) {
				for k := range n {
					used[at+k] = true
				}
			})
		}
		for i, v := range flat {
			if !used[i] && v != 0 {
				t.Fatalf("chunks of %d: padding element %d is %v", chunk, i, v)
			}
		}
	}
}
