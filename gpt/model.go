package gpt

import (
	"fmt"
	"math"

	"tinygpt/backend"
)

// Model is a TinyGPT network on a backend: its weights and their gradients, and the activation
// workspaces of the passes run so far. Its numbers live on the backend; the host only sees them
// through Weights, SetWeights and the losses it reads back.
type Model struct {
	Config Config
	Params []Param // in file order

	be       backend.Backend
	flatSize int
	w, g     backend.Tensor // flat weights and gradients
	wv, gv   tensors        // per-parameter views of w and g

	train *workspace // the last training workspace (forward kept for backward)
	evals []*workspace
}

// New allocates a model of shape c on be, with all weights zero (see SetWeights, InitWeights).
func New(be backend.Backend, c Config) (*Model, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	ps, flat, err := paramTable(c, be.SegmentLen())
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", c, err)
	}
	m := &Model{Config: c, Params: ps, be: be, flatSize: flat}
	m.w = be.Alloc(flat)
	m.g = be.Alloc(flat)
	m.wv = views(be, m.w, ps, c.Layers)
	m.gv = views(be, m.g, ps, c.Layers)
	return m, nil
}

// Backend returns the backend the model lives on.
func (m *Model) Backend() backend.Backend { return m.be }

// FlatSize is the number of elements of the flat parameter tensors (with alignment padding);
// optimizer moments are tensors of this size, laid out like the weights.
func (m *Model) FlatSize() int { return m.flatSize }

// WeightsTensor and GradsTensor return the flat weight and gradient tensors, for the optimizer.
func (m *Model) WeightsTensor() backend.Tensor { return m.w }

// GradsTensor returns the flat gradient tensor.
func (m *Model) GradsTensor() backend.Tensor { return m.g }

// SetWeights loads weights given in file layout (Config.NumParams values in ParamTable order).
func (m *Model) SetWeights(w []float32) error { return m.Upload(m.w, w) }

// Weights returns the weights in file layout.
func (m *Model) Weights() []float32 { return m.Download(m.w) }

// Grads returns the gradients of the last Backward in file layout.
func (m *Model) Grads() []float32 { return m.Download(m.g) }

// moveChunk is how many flat elements Upload and Download move at a time (4 MB, a multiple of
// backend.SliceAlign): a checkpoint of a large model then holds its file-layout copy and one
// chunk, not a second whole copy in the flat layout besides. (A variable for tests.)
var moveChunk = 1 << 20

// Upload loads w, Config.NumParams values in file layout, into t, a tensor of the model's flat
// parameter layout (the weights, or an optimizer moment).
func (m *Model) Upload(t backend.Tensor, w []float32) error {
	if len(w) != m.Config.NumParams() {
		return fmt.Errorf("have %d values, model %s needs %d", len(w), m.Config, m.Config.NumParams())
	}
	buf := make([]float32, min(m.flatSize, moveChunk))
	for lo := 0; lo < m.flatSize; lo += len(buf) {
		part := buf[:min(len(buf), m.flatSize-lo)]
		clear(part) // the padding between parameters
		for _, p := range m.Params {
			p.runs(lo, lo+len(part), func(file, flat, n int) { copy(part[flat-lo:flat-lo+n], w[file:]) })
		}
		m.be.Upload(m.be.Slice(t, lo, len(part)), part)
	}
	return nil
}

// Download returns t, a tensor of the model's flat parameter layout (the weights, their
// gradients, an optimizer moment), in file layout.
func (m *Model) Download(t backend.Tensor) []float32 {
	w := make([]float32, m.Config.NumParams())
	buf := make([]float32, min(m.flatSize, moveChunk))
	for lo := 0; lo < m.flatSize; lo += len(buf) {
		part := buf[:min(len(buf), m.flatSize-lo)]
		m.be.Download(part, t, lo)
		for _, p := range m.Params {
			p.runs(lo, lo+len(part), func(file, flat, n int) { copy(w[file:file+n], part[flat-lo:]) })
		}
	}
	return w
}

// workspace holds the activations of one forward pass of B sequences of up to T tokens, and
// (when built for training) the gradient scratch of its backward pass.
type workspace struct {
	B, T       int
	train      bool
	tokens     backend.Tensor // int32 [B·T]
	targets    backend.Tensor // int32 [B·T]
	res        []backend.Tensor
	layers     []layerActs
	lnf        backend.Tensor
	lnfMean    backend.Tensor
	lnfRstd    backend.Tensor
	logits     backend.Tensor // [B·T, V]; the training pass overwrites it with its gradient
	losses     backend.Tensor // [B·T]
	hasLoss    bool           // losses holds a training pass's losses (backward keeps them)
	lossHost   []float32
	dres, dtmp backend.Tensor // [B·T, C]
	dln        backend.Tensor
	dqkv       backend.Tensor // [B·T, 3C]: dq, dk and dv as column blocks
	dfch       backend.Tensor // [B·T, DMlp]
	dropoutP   float32
	seeds      backend.Tensor // int32: the pass's dropout seeds, one per site (dropoutSite)
	seedHost   []int32
	ran        bool // a training forward has run and not yet been used by Backward
}

// layerActs are one block's saved activations.
type layerActs struct {
	ln1, ln1Mean, ln1Rstd backend.Tensor
	qkv                   backend.Tensor // [B·T, 3C]: q, k and v as column blocks
	att, attLSE           backend.Tensor // attention output (before o_proj) and log-sum-exp
	res2                  backend.Tensor // x + attention branch
	ln2, ln2Mean, ln2Rstd backend.Tensor
	fch, fchGELU          backend.Tensor // [B·T, DMlp] GELU' and GELU of the MLP's first layer
}

func (m *Model) newWorkspace(B, T int, train bool) *workspace {
	be, c := m.be, m.Config
	N, C := B*T, c.DModel
	ws := &workspace{B: B, T: T, train: train,
		tokens: be.AllocInt(N), targets: be.AllocInt(N),
		lnf: be.Alloc(N * C), lnfMean: be.Alloc(N), lnfRstd: be.Alloc(N),
		logits: be.Alloc(N * Vocab), losses: be.Alloc(N), lossHost: make([]float32, N),
	}
	ws.res = make([]backend.Tensor, c.Layers+1)
	for i := range ws.res {
		ws.res[i] = be.Alloc(N * C)
	}
	// q, k and v come out of one product as the column blocks of a layer's qkv, which
	// attention reads in place.
	ws.layers = make([]layerActs, c.Layers)
	for l := range ws.layers {
		ws.layers[l] = layerActs{
			ln1: be.Alloc(N * C), ln1Mean: be.Alloc(N), ln1Rstd: be.Alloc(N),
			qkv: be.Alloc(N * 3 * C),
			att: be.Alloc(N * C), attLSE: be.Alloc(B * c.Heads * T),
			res2: be.Alloc(N * C),
			ln2:  be.Alloc(N * C), ln2Mean: be.Alloc(N), ln2Rstd: be.Alloc(N),
			fch: be.Alloc(N * c.DMlp), fchGELU: be.Alloc(N * c.DMlp),
		}
	}
	if train {
		ws.dres, ws.dtmp = be.Alloc(N*C), be.Alloc(N*C)
		ws.dln = be.Alloc(N * C)
		ws.dqkv = be.Alloc(N * 3 * C)
		ws.dfch = be.Alloc(N * c.DMlp)
		ws.seedHost = make([]int32, backend.SeedWords*dropoutSites*c.Layers)
		ws.seeds = be.AllocInt(len(ws.seedHost))
	}
	return ws
}

// workspaceFor returns a workspace of B×T for a training pass (train) or an inference one,
// allocating one the first time a shape is seen. An inference pass of the training shape (an
// evaluation between steps) runs in the training workspace, whose activations it replaces:
// a Backward after it is refused, and TrainLoss has nothing to read.
func (m *Model) workspaceFor(B, T int, train bool) *workspace {
	if train {
		if m.train == nil || m.train.B != B || m.train.T != T {
			m.train = m.newWorkspace(B, T, true)
		}
		return m.train
	}
	if ws := m.train; ws != nil && ws.B == B && ws.T == T {
		ws.ran, ws.hasLoss = false, false
		return ws
	}
	for _, ws := range m.evals {
		if ws.B == B && ws.T == T {
			return ws
		}
	}
	ws := m.newWorkspace(B, T, false)
	m.evals = append(m.evals, ws)
	return ws
}

// Reserve allocates the workspace of training passes over batches of B×T now, rather than at
// the first pass, and returns the backend's error (backend.Err): a device without the memory
// for it says so before any step is taken.
func (m *Model) Reserve(B, T int) error {
	m.workspaceFor(B, T, true)
	return backend.Err(m.be)
}

// Batch is B sequences of T tokens and, for a loss, the T tokens that follow each position.
type Batch struct {
	B, T    int
	Inputs  []int32 // [B·T]
	Targets []int32 // [B·T]; nil for a pass without loss
}

// Forward runs the network on batch without keeping anything for a backward pass and returns
// the mean loss over all positions (NaN if the batch has no targets).
func (m *Model) Forward(batch Batch) (float64, error) {
	if err := m.check(batch); err != nil {
		return 0, err
	}
	ws := m.workspaceFor(batch.B, batch.T, false)
	m.forward(ws, batch, 0, 0, false)
	if batch.Targets == nil {
		return math.NaN(), nil
	}
	return ws.meanLoss(m.be), nil
}

// Logits runs the network on batch (targets are ignored) and returns the logits for every
// position, [B·T·Vocab].
func (m *Model) Logits(batch Batch) ([]float32, error) {
	batch.Targets = nil
	if err := m.check(batch); err != nil {
		return nil, err
	}
	ws := m.workspaceFor(batch.B, batch.T, false)
	m.forward(ws, batch, 0, 0, false)
	out := make([]float32, batch.B*batch.T*Vocab)
	m.be.Download(out, ws.logits, 0)
	return out, nil
}

// TrainForward runs the forward pass of a training step on batch, with dropout probability p
// drawn from seed, and returns the mean loss. The logits' gradient is computed in the same
// pass; Backward completes the step.
func (m *Model) TrainForward(batch Batch, p float32, seed uint64) (float64, error) {
	if err := m.RecordTrainForward(batch, p, seed); err != nil {
		return 0, err
	}
	return m.TrainLoss(), nil
}

// RecordTrainForward is TrainForward without reading the loss back: on a GPU backend the
// pass is recorded and runs while the caller goes on (with Backward and the update), and
// TrainLoss reads the loss when it is needed, waiting only then.
func (m *Model) RecordTrainForward(batch Batch, p float32, seed uint64) error {
	if err := m.check(batch); err != nil {
		return err
	}
	if batch.Targets == nil {
		return fmt.Errorf("training batch has no targets")
	}
	ws := m.workspaceFor(batch.B, batch.T, true)
	m.forward(ws, batch, p, seed, true)
	ws.ran, ws.hasLoss = true, true
	return nil
}

// TrainLoss returns the mean loss of the last training forward pass (NaN if there was none).
func (m *Model) TrainLoss() float64 {
	if m.train == nil || !m.train.hasLoss {
		return math.NaN()
	}
	return m.train.meanLoss(m.be)
}

// TrainLosses returns the per-position losses [B·T] of the last training forward pass (nil
// before the first), for reading them back without waiting (backend.Backend.DownloadLater).
func (m *Model) TrainLosses() backend.Tensor {
	if m.train == nil || !m.train.hasLoss {
		return nil
	}
	return m.train.losses
}

func (m *Model) check(b Batch) error {
	switch {
	case b.B < 1 || b.T < 1:
		return fmt.Errorf("batch shape %d×%d is empty", b.B, b.T)
	case b.T > m.Config.Ctx:
		return fmt.Errorf("sequence length %d exceeds the model's context %d", b.T, m.Config.Ctx)
	case len(b.Inputs) != b.B*b.T:
		return fmt.Errorf("batch has %d inputs, want %d×%d", len(b.Inputs), b.B, b.T)
	case b.Targets != nil && len(b.Targets) != b.B*b.T:
		return fmt.Errorf("batch has %d targets, want %d×%d", len(b.Targets), b.B, b.T)
	}
	for _, t := range b.Inputs {
		if t < 0 || t >= Vocab {
			return fmt.Errorf("token %d out of range [0, %d)", t, Vocab)
		}
	}
	for _, t := range b.Targets {
		if t < 0 || t >= Vocab {
			return fmt.Errorf("target %d out of range [0, %d)", t, Vocab)
		}
	}
	return nil
}

func (ws *workspace) meanLoss(be backend.Backend) float64 {
	n := ws.B * ws.T
	be.Download(ws.lossHost[:n], ws.losses, 0)
	var s float64
	for _, v := range ws.lossHost[:n] {
		s += float64(v)
	}
	return s / float64(n)
}

// Dropout sites: each gets its own mask seed. The embeddings' site is layer 0's only.
const (
	siteEmbedding = iota
	siteAttention
	siteMLP
	dropoutSites // sites per layer
)

// dropoutSeed is the mask seed of a pass with the given seed at a layer's site.
func dropoutSeed(seed uint64, layer, site int) uint64 {
	return Mix64(seed ^ Mix64(uint64(layer)<<8|uint64(site)+1))
}

// dropoutSite is the entry of a workspace's seeds that holds a layer's site's mask seed.
func dropoutSite(layer, site int) int { return layer*dropoutSites + site }

// putSeeds writes the mask seeds of a pass with the given seed to ws.seeds, all at once
// before its kernels (see backend.PutSeed).
func (ws *workspace) putSeeds(be backend.Backend, seed uint64) {
	for l := range len(ws.seedHost) / (backend.SeedWords * dropoutSites) {
		for site := range dropoutSites {
			backend.PutSeed(ws.seedHost, dropoutSite(l, site), dropoutSeed(seed, l, site))
		}
	}
	be.UploadInt(ws.seeds, ws.seedHost)
}

// linear computes out = in·W + b for N rows, in [N, IC], W [IC, OC].
func (m *Model) linear(out, in, w, b backend.Tensor, N, IC, OC int) {
	m.be.Linear(out, nil, in, w, b, N, IC, OC)
}

// forward is the network, one block after another. With grad (a training pass, in a training
// workspace) the cross-entropy also leaves the logits' gradient (scaled for the mean loss) in
// ws.logits.
func (m *Model) forward(ws *workspace, batch Batch, p float32, seed uint64, grad bool) {
	be, c := m.be, m.Config
	B, T, C, NH, F := batch.B, batch.T, c.DModel, c.Heads, c.DMlp
	N := B * T
	ws.dropoutP = p
	be.UploadInt(ws.tokens, batch.Inputs)
	if batch.Targets != nil {
		be.UploadInt(ws.targets, batch.Targets)
	}
	if p > 0 {
		ws.putSeeds(be, seed)
	}
	w := &m.wv

	// Embeddings, and the first layer's LayerNorm of them. Each residual add below is computed
	// together with the LayerNorm that follows it.
	be.Encoder(ws.res[0], ws.tokens, w.wte, w.wpe, B, T, 0, C)
	be.Dropout(ws.res[0], ws.res[0], N*C, p, ws.seeds, dropoutSite(0, siteEmbedding))
	out, mean, rstd, g, b := m.normAfter(ws, -1)
	be.LayerNorm(out, mean, rstd, ws.res[0], g, b, N, C)

	for l := range c.Layers {
		x, a, lw := ws.res[l], &ws.layers[l], &w.layers[l]
		// Attention branch: res2 = x + dropout(o_proj(attn(LN1(x)))), LN1(x) in a.ln1.
		be.QKVAttention(a.qkv, a.att, a.attLSE, a.ln1, lw.wqkv, lw.bqkv, B, T, C, NH)
		be.LinearAddLayerNorm(a.res2, a.ln2, a.ln2Mean, a.ln2Rstd, a.att, lw.wo, lw.bo, x, lw.ln2G, lw.ln2B,
			N, C, C, p, ws.seeds, dropoutSite(l, siteAttention))
		// MLP branch: res2 + dropout(fc_out(GELU(fc_in(LN2(res2))))); fch gets GELU' for backward.
		out, mean, rstd, g, b = m.normAfter(ws, l)
		be.MLPAddLayerNorm(ws.res[l+1], out, mean, rstd, a.fch, a.fchGELU, a.ln2, lw.fcW, lw.fcB, lw.prW, lw.prB,
			a.res2, g, b, N, C, F, p, ws.seeds, dropoutSite(l, siteMLP))
	}

	// The head tied to the token embedding: logits = LN(x)·wteᵀ, LN(x) in ws.lnf.
	be.MatMul(ws.logits, ws.lnf, w.wte, N, Vocab, C, backend.NT, false)
	if batch.Targets != nil {
		var dlogits backend.Tensor
		if grad {
			dlogits = ws.logits
		}
		be.CrossEntropy(ws.losses, dlogits, ws.logits, ws.targets, N, Vocab, 1/float32(N))
	}
}

// normAfter returns the LayerNorm that reads the residual stream after layer l (−1: after the
// embeddings): its output, saved statistics and parameters, those of layer l+1's first
// LayerNorm, or of the final one after the last layer.
func (m *Model) normAfter(ws *workspace, l int) (out, mean, rstd, g, b backend.Tensor) {
	g, b = m.normParamsAfter(l)
	if l+1 < m.Config.Layers {
		a := &ws.layers[l+1]
		return a.ln1, a.ln1Mean, a.ln1Rstd, g, b
	}
	return ws.lnf, ws.lnfMean, ws.lnfRstd, g, b
}

// normParamsAfter returns the gains and biases of the LayerNorm after layer l (see normAfter).
func (m *Model) normParamsAfter(l int) (g, b backend.Tensor) {
	if l+1 < m.Config.Layers {
		lw := &m.wv.layers[l+1]
		return lw.ln1G, lw.ln1B
	}
	return m.wv.lnfG, m.wv.lnfB
}

// ZeroGrads clears the gradients; Backward adds into them.
func (m *Model) ZeroGrads() { m.be.Zero(m.g, m.flatSize) }

// Backward adds the gradient of the last TrainForward's mean loss into the gradients. It runs
// the forward pass in reverse, each layer's backward in the place of its forward.
func (m *Model) Backward() error {
	ws := m.train
	if ws == nil || !ws.ran {
		return fmt.Errorf("Backward needs a TrainForward first")
	}
	ws.ran = false
	be, c := m.be, m.Config
	B, T, C, NH, F := ws.B, ws.T, c.DModel, c.Heads, c.DMlp
	N := B * T
	p := ws.dropoutP
	w, g := &m.wv, &m.gv

	// Head and final LayerNorm. ws.logits holds dloss/dlogits.
	be.MatMul(ws.dln, ws.logits, w.wte, N, C, Vocab, backend.NN, false)
	be.MatMul(g.wte, ws.logits, ws.lnf, Vocab, C, N, backend.TN, true)
	be.Zero(ws.dres, N*C)
	be.LayerNormBackward(ws.dres, g.lnfG, g.lnfB, ws.dln, ws.res[c.Layers], w.lnfG, ws.lnfMean, ws.lnfRstd, N, C)

	// dropoutGrad returns the gradient before a dropout site given the gradient after it.
	dropoutGrad := func(d backend.Tensor, layer, site int) backend.Tensor {
		if p == 0 {
			return d
		}
		be.DropoutBackward(ws.dtmp, d, N*C, p, ws.seeds, dropoutSite(layer, site))
		return ws.dtmp
	}

	for l := c.Layers - 1; l >= 0; l-- {
		x, a, lw, lg := ws.res[l], &ws.layers[l], &w.layers[l], &g.layers[l]
		// ws.dres is the gradient of res[l+1] = res2 + mlp(res2).
		dproj := dropoutGrad(ws.dres, l, siteMLP)
		// ws.dfch is the gradient before the GELU: times the GELU' that forward kept in a.fch.
		be.LinearBackward(ws.dfch, lg.prW, lg.prB, dproj, a.fchGELU, lw.prW, a.fch, N, F, C, false)
		be.LinearLayerNormBackward(ws.dln, lg.fcW, lg.fcB, ws.dfch, a.ln2, lw.fcW,
			ws.dres, lg.ln2G, lg.ln2B, a.res2, lw.ln2G, a.ln2Mean, a.ln2Rstd, N, C, F)

		// ws.dres is now the gradient of res2 = x + attn(x).
		dproj = dropoutGrad(ws.dres, l, siteAttention)
		be.LinearAttentionBackward(ws.dqkv, lg.wo, lg.bo, dproj, a.att, lw.wo, a.qkv, a.attLSE, B, T, C, NH)
		be.LinearLayerNormBackward(ws.dln, lg.wqkv, lg.bqkv, ws.dqkv, a.ln1, lw.wqkv,
			ws.dres, lg.ln1G, lg.ln1B, x, lw.ln1G, a.ln1Mean, a.ln1Rstd, N, C, 3*C)
	}

	// ws.dres is the gradient of the (dropped-out) embeddings.
	d := dropoutGrad(ws.dres, 0, siteEmbedding)
	be.EncoderBackward(g.wte, g.wpe, d, ws.tokens, B, T, C)
	return nil
}
