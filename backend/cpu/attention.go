package cpu

import (
	"math"

	"tinygpt/backend"
)

// Causal self-attention, flash style: the forward pass keeps only each query's log-sum-exp of
// scores (never the T×T probability matrix), and the backward pass recomputes the probabilities
// from it. Work is split over (sequence, head) pairs, which own disjoint column blocks of the
// outputs, so no two workers write the same element.

type attnMode int

const (
	attnForward attnMode = iota
	attnBackward
	attnDecode
)

type attentionTask struct {
	mode              attnMode
	out, lse, q, k, v []float32
	dq, dk, dv, dout  []float32
	T, C, NH, hs      int
	scale             float32
	scores            [][]float32 // per worker, at least 2·T
}

func (be *Backend) attention(mode attnMode, B, T, C, NH int) *attentionTask {
	t := &be.attn
	if len(t.scores) != be.pool.workers {
		t.scores = make([][]float32, be.pool.workers)
	}
	for w := range t.scores {
		if len(t.scores[w]) < 2*T {
			t.scores[w] = make([]float32, 2*T)
		}
	}
	t.mode, t.T, t.C, t.NH, t.hs = mode, T, C, NH, C/NH
	t.scale = float32(1 / math.Sqrt(float64(C/NH)))
	return t
}

// Attention implements backend.Backend.
func (be *Backend) Attention(out, lse, q, k, v backend.Tensor, B, T, C, NH int) {
	t := be.attention(attnForward, B, T, C, NH)
	t.out, t.lse, t.q, t.k, t.v = f32(out), f32(lse), f32(q), f32(k), f32(v)
	be.pool.Run(t, B*NH, 1, 2*T*T*C/NH)
}

// AttentionBackward implements backend.Backend.
func (be *Backend) AttentionBackward(dq, dk, dv, dout, q, k, v, out, lse backend.Tensor, B, T, C, NH int) {
	t := be.attention(attnBackward, B, T, C, NH)
	t.dq, t.dk, t.dv, t.dout = f32(dq), f32(dk), f32(dv), f32(dout)
	t.q, t.k, t.v, t.out, t.lse = f32(q), f32(k), f32(v), f32(out), f32(lse)
	be.pool.Run(t, B*NH, 1, 5*T*T*C/NH)
}

// AttentionDecode implements backend.Backend.
func (be *Backend) AttentionDecode(out, q, knew, vnew, kcache, vcache backend.Tensor, pos, C, NH int) {
	kc, vc := f32(kcache), f32(vcache)
	copy(kc[pos*C:pos*C+C], f32(knew)[:C])
	copy(vc[pos*C:pos*C+C], f32(vnew)[:C])
	t := be.attention(attnDecode, 1, pos+1, C, NH)
	t.out, t.q, t.k, t.v = f32(out), f32(q), kc, vc
	be.pool.Run(t, NH, 1, 4*(pos+1)*C/NH)
}

func (t *attentionTask) run(w, lo, hi int) {
	for pair := lo; pair < hi; pair++ {
		b, h := pair/t.NH, pair%t.NH
		switch t.mode {
		case attnForward:
			t.forward(b, h, t.scores[w])
		case attnBackward:
			t.backward(b, h, t.scores[w])
		case attnDecode:
			t.decode(h, t.scores[w])
		}
	}
}

// row returns the head-h slice of row r (a flat [B·T, C] row index) of x.
func (t *attentionTask) row(x []float32, r, h int) []float32 {
	return x[r*t.C+h*t.hs:][:t.hs]
}

func dotGo(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func axpyGo(y []float32, a float32, x []float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += a * x[i]
	}
}

// scoresFor fills s[0:n] with the scaled scores of query row qr against key rows base..base+n−1
// and returns their maximum.
func (t *attentionTask) scoresFor(s []float32, qr, base, n, h int) float32 {
	qt := t.row(t.q, qr, h)
	mx := float32(math.Inf(-1))
	for j := 0; j < n; j++ {
		s[j] = dot(qt, t.row(t.k, base+j, h)) * t.scale
		mx = max(mx, s[j])
	}
	return mx
}

func (t *attentionTask) forward(b, h int, s []float32) {
	T, base := t.T, b*t.T
	for i := 0; i < T; i++ {
		mx := t.scoresFor(s, base+i, base, i+1, h)
		var sum float32
		for j := 0; j <= i; j++ {
			s[j] = exp32(s[j] - mx)
			sum += s[j]
		}
		o := t.row(t.out, base+i, h)
		clear(o)
		inv := 1 / sum
		for j := 0; j <= i; j++ {
			axpy(o, s[j]*inv, t.row(t.v, base+j, h))
		}
		t.lse[(b*t.NH+h)*T+i] = mx + float32(math.Log(float64(sum)))
	}
}

func (t *attentionTask) backward(b, h int, s []float32) {
	T, base := t.T, b*t.T
	for i := 0; i < T; i++ {
		clear(t.row(t.dq, base+i, h))
		clear(t.row(t.dk, base+i, h))
		clear(t.row(t.dv, base+i, h))
	}
	dp := s[T : 2*T]
	for i := 0; i < T; i++ {
		t.scoresFor(s, base+i, base, i+1, h)
		lse := t.lse[(b*t.NH+h)*T+i]
		do := t.row(t.dout, base+i, h)
		// D = Σ_j p_j·dp_j equals dout_i·out_i.
		D := dot(do, t.row(t.out, base+i, h))
		dqi := t.row(t.dq, base+i, h)
		qi := t.row(t.q, base+i, h)
		for j := 0; j <= i; j++ {
			p := exp32(s[j] - lse)
			s[j] = p
			dp[j] = dot(do, t.row(t.v, base+j, h))
		}
		for j := 0; j <= i; j++ {
			ds := s[j] * (dp[j] - D) * t.scale
			axpy(dqi, ds, t.row(t.k, base+j, h))
			axpy(t.row(t.dk, base+j, h), ds, qi)
			axpy(t.row(t.dv, base+j, h), s[j], do)
		}
	}
}

func (t *attentionTask) decode(h int, s []float32) {
	n := t.T
	qt := t.q[h*t.hs:][:t.hs]
	mx := float32(math.Inf(-1))
	for j := 0; j < n; j++ {
		s[j] = dot(qt, t.row(t.k, j, h)) * t.scale
		mx = max(mx, s[j])
	}
	var sum float32
	for j := 0; j < n; j++ {
		s[j] = exp32(s[j] - mx)
		sum += s[j]
	}
	o := t.out[h*t.hs:][:t.hs]
	clear(o)
	inv := 1 / sum
	for j := 0; j < n; j++ {
		axpy(o, s[j]*inv, t.row(t.v, j, h))
	}
}
