package cpu

import "tinygpt/backend"

// Matrix products are computed the way BLAS libraries do it: C is cut into tiles of mcTile×ncTile
// that workers take independently; for each tile the inner dimension is walked in blocks of
// kcBlock, the A and B blocks are copied ("packed") into small contiguous panels, and a
// register-blocked micro-kernel multiplies an MR-row panel of A by an NR-column panel of B.
// Packing turns all three layouts (NN, NT, TN) into the same panel format, so one micro-kernel
// serves them all, and it keeps the micro-kernel's reads sequential.
//
// Every element of C is summed in the same order (k ascending within a kc block, blocks
// ascending) whatever the tile sizes or the number of workers, so results are reproducible.
const (
	mcTile  = 96  // rows of C per tile (a multiple of every micro-kernel's MR)
	ncTile  = 128 // columns of C per tile (a multiple of every micro-kernel's NR)
	kcBlock = 256 // inner-dimension block; fixed, because it decides the summation order
)

// microKernel computes acc[MR×NR] (row-major, overwritten) = Σ_k a[k·MR+r]·b[k·NR+c] over kc
// steps of packed panels a (kc×MR) and b (kc×NR).
type microKernel struct {
	name   string
	mr, nr int
	fn     func(kc int, a, b, acc []float32)
}

// goKernel is the portable micro-kernel in plain Go, used where no assembly kernel exists.
var goKernel = microKernel{name: "go 4x4", mr: 4, nr: 4, fn: kernel4x4}

func kernel4x4(kc int, a, b, acc []float32) {
	var c00, c01, c02, c03, c10, c11, c12, c13 float32
	var c20, c21, c22, c23, c30, c31, c32, c33 float32
	a = a[:kc*4]
	b = b[:kc*4]
	for k := 0; k < kc; k++ {
		ak := a[k*4 : k*4+4 : k*4+4]
		bk := b[k*4 : k*4+4 : k*4+4]
		b0, b1, b2, b3 := bk[0], bk[1], bk[2], bk[3]
		a0 := ak[0]
		c00 += a0 * b0
		c01 += a0 * b1
		c02 += a0 * b2
		c03 += a0 * b3
		a1 := ak[1]
		c10 += a1 * b0
		c11 += a1 * b1
		c12 += a1 * b2
		c13 += a1 * b3
		a2 := ak[2]
		c20 += a2 * b0
		c21 += a2 * b1
		c22 += a2 * b2
		c23 += a2 * b3
		a3 := ak[3]
		c30 += a3 * b0
		c31 += a3 * b1
		c32 += a3 * b2
		c33 += a3 * b3
	}
	acc = acc[:16]
	acc[0], acc[1], acc[2], acc[3] = c00, c01, c02, c03
	acc[4], acc[5], acc[6], acc[7] = c10, c11, c12, c13
	acc[8], acc[9], acc[10], acc[11] = c20, c21, c22, c23
	acc[12], acc[13], acc[14], acc[15] = c30, c31, c32, c33
}

// mmScratch is one worker's packing space.
type mmScratch struct {
	ap, bp, acc []float32
}

func newMMScratch(k microKernel) mmScratch {
	return mmScratch{
		ap:  make([]float32, mcTile*kcBlock),
		bp:  make([]float32, kcBlock*ncTile),
		acc: make([]float32, k.mr*k.nr),
	}
}

// matmulTask is one matrix product in flight; its fields are set by MatMul before each run.
type matmulTask struct {
	be         *Backend
	c, a, b    []float32
	M, N, K    int
	l          backend.Layout
	accumulate bool
	mc, nc     int // tile size for this product
	tilesN     int
}

// MatMul implements backend.Backend.
func (be *Backend) MatMul(c, a, b backend.Tensor, M, N, K int, l backend.Layout, accumulate bool) {
	t := &be.mm
	t.be, t.c, t.a, t.b = be, f32(c)[:M*N], f32(a)[:M*K], f32(b)[:K*N]
	t.M, t.N, t.K, t.l, t.accumulate = M, N, K, l, accumulate
	if K == 0 {
		if !accumulate {
			clear(t.c)
		}
		return
	}
	// Shrink tiles for small products so that every worker gets some, keeping multiples of the
	// micro-kernel's block.
	mr, nr := be.kern.mr, be.kern.nr
	t.mc, t.nc = mcTile, ncTile
	workers := be.pool.workers
	for tiles(M, t.mc)*tiles(N, t.nc) < 2*workers && (t.mc > 4*mr || t.nc > 4*nr) {
		if t.mc >= t.nc && t.mc > 4*mr {
			t.mc = roundUp(t.mc/2, mr)
		} else if t.nc > 4*nr {
			t.nc = roundUp(t.nc/2, nr)
		} else {
			t.mc = roundUp(t.mc/2, mr)
		}
	}
	t.tilesN = tiles(N, t.nc)
	n := tiles(M, t.mc) * t.tilesN
	be.pool.Run(t, n, 1, 2*t.mc*t.nc*K)
}

func tiles(n, size int) int { return (n + size - 1) / size }

func roundUp(n, m int) int { return (n + m - 1) / m * m }

func (t *matmulTask) run(w, lo, hi int) {
	for tile := lo; tile < hi; tile++ {
		i0 := tile / t.tilesN * t.mc
		j0 := tile % t.tilesN * t.nc
		t.tile(&t.be.scratch[w], i0, j0, min(t.mc, t.M-i0), min(t.nc, t.N-j0))
	}
}

// tile computes C[i0:i0+mc, j0:j0+nc].
func (t *matmulTask) tile(s *mmScratch, i0, j0, mc, nc int) {
	kern := t.be.kern
	mr, nr := kern.mr, kern.nr
	for k0 := 0; k0 < t.K; k0 += kcBlock {
		kc := min(kcBlock, t.K-k0)
		t.packA(s.ap, i0, mc, k0, kc, mr)
		t.packB(s.bp, j0, nc, k0, kc, nr)
		store := k0 == 0 && !t.accumulate
		for jp := 0; jp < nc; jp += nr {
			bp := s.bp[jp*kc : (jp+nr)*kc]
			cols := min(nr, nc-jp)
			for ip := 0; ip < mc; ip += mr {
				kern.fn(kc, s.ap[ip*kc:(ip+mr)*kc], bp, s.acc)
				rows := min(mr, mc-ip)
				for r := 0; r < rows; r++ {
					crow := t.c[(i0+ip+r)*t.N+j0+jp:][:cols]
					arow := s.acc[r*nr:][:cols]
					if store {
						copy(crow, arow)
					} else {
						for j, v := range arow {
							crow[j] += v
						}
					}
				}
			}
		}
	}
}

// packA copies op(A)[i0:i0+mc, k0:k0+kc] into panels of mr rows: ap[p·mr·kc + k·mr + r].
// Rows past mc are zero.
func (t *matmulTask) packA(ap []float32, i0, mc, k0, kc, mr int) {
	for p := 0; p < mc; p += mr {
		panel := ap[p*kc : (p+mr)*kc]
		rows := min(mr, mc-p)
		if t.l == backend.TN { // A is [K, M]: rows of op(A) are columns of A
			for k := 0; k < kc; k++ {
				src := t.a[(k0+k)*t.M+i0+p:][:rows]
				dst := panel[k*mr : k*mr+mr]
				copy(dst, src)
				clear(dst[rows:])
			}
			continue
		}
		for r := 0; r < mr; r++ {
			if r >= rows {
				for k := 0; k < kc; k++ {
					panel[k*mr+r] = 0
				}
				continue
			}
			src := t.a[(i0+p+r)*t.K+k0:][:kc]
			for k, v := range src {
				panel[k*mr+r] = v
			}
		}
	}
}

// packB copies op(B)[k0:k0+kc, j0:j0+nc] into panels of nr columns: bp[p·kc + k·nr + c].
// Columns past nc are zero.
func (t *matmulTask) packB(bp []float32, j0, nc, k0, kc, nr int) {
	for p := 0; p < nc; p += nr {
		panel := bp[p*kc : (p+nr)*kc]
		cols := min(nr, nc-p)
		if t.l != backend.NT { // B is [K, N]
			for k := 0; k < kc; k++ {
				src := t.b[(k0+k)*t.N+j0+p:][:cols]
				dst := panel[k*nr : k*nr+nr]
				copy(dst, src)
				clear(dst[cols:])
			}
			continue
		}
		for c := 0; c < nr; c++ { // B is [N, K]: columns of op(B) are rows of B
			if c >= cols {
				for k := 0; k < kc; k++ {
					panel[k*nr+c] = 0
				}
				continue
			}
			src := t.b[(j0+p+c)*t.K+k0:][:kc]
			for k, v := range src {
				panel[k*nr+c] = v
			}
		}
	}
}
