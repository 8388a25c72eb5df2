// Causal multi-head attention in tiles, flash-attention-2 style, for head sizes up to 32 (the
// training path; attention.wgsl's one-row-per-thread kernels serve decoding and wider heads,
// and its backward_d and forward_merge passes serve both).
//
// A workgroup of 64 threads owns a block of TR = 32 rows of one (slice, sequence, head) and
// walks its partner rows in tiles of TR, each tile copied to workgroup memory by all threads.
// The products between two tiles are register-blocked: thread (a, c), a = lid / 8 and
// c = lid % 8, computes the 4×4 block of scores between rows a, a+8, a+16, a+24 of one tile and
// rows c, c+8, c+16, c+24 of the other (16 dot products from 8 vec4 reads, where a thread that
// owns one row does 4), then the products with the probabilities (P·V, Pᵀ·dout, dS·K, dSᵀ·Q)
// give each thread one vec4 column c of four rows, the probabilities passing through workgroup
// memory. No T×T matrix is stored anywhere:
// - forward: per key tile S = Q·Kᵀ, an online softmax (the rows' running maxima found through
//   workgroup memory, each thread keeping its own share of the running sums), O += P·V; saves
//   lse = m + log(l).
// - backward: P = exp(S·scale − lse) and dS = P∘(dout·Vᵀ − D)·scale are recomputed per tile;
//   dkdv blocks (keys) sum dV = Pᵀ·dout and dK = dSᵀ·Q over their query tiles, dq blocks
//   (queries) sum dQ = dS·K over their key tiles, both kinds in one dispatch.
// When rows are few, each block's partners are split into slices, as in attention.wgsl, whose
// partial results forward_merge or the reduce kernel combine.
//
// Tiles hold a row as W4 vec4 (the head's HS4L vec4, zero past HS, rounded up to a power of
// two), vec4 e of row r at r·W4 + (e ^ (r mod W4)): the xor spreads the rows a thread group
// reads at once over the memory banks. The Go side compiles a kernel per head size.

const W4: u32 = W4u;
const TR: u32 = 32u;

// Every element is written before it is read: workgroup memory is not zeroed on Vulkan
// (internal/gpu/zeroinit.go).
var<workgroup> tA: array<vec4<f32>, TAu>; // q rows (the block's, or a tile's in dkdv)
var<workgroup> tB: array<vec4<f32>, TAu>; // dout rows, as tA
var<workgroup> tC: array<vec4<f32>, 256>; // k rows; then v (forward) or P (dkdv)
var<workgroup> tD: array<vec4<f32>, 256>; // v rows; then P (forward) or dS (backward)
var<workgroup> tM: array<vec4<f32>, 64>;  // forward: per-thread row maxima, then row sums

// Params is attention.wgsl's: NQ = TK = T and P0 = 0 here.
struct Params {
    B: u32,
    NQ: u32,
    TK: u32,
    C: u32,
    NH: u32,
    HS: u32,
    P0: u32,
    scale: f32,
    saveLSE: u32,
    slices: u32,
}

@group(0) @binding(0) var<uniform> prm: Params;
// forward:  out, lse, qkv (sliced: out and (m, l) partials for forward_merge)
// backward: dqkv, D, dout, qkv, -, -, -, lse
@group(0) @binding(1) var<storage, read_write> b1: array<f32>;
@group(0) @binding(2) var<storage, read_write> b2: array<f32>;
@group(0) @binding(3) var<storage, read_write> b3: array<f32>;
@group(0) @binding(4) var<storage, read_write> b4: array<f32>;
@group(0) @binding(5) var<storage, read_write> b5: array<f32>;
@group(0) @binding(6) var<storage, read_write> b6: array<f32>;
@group(0) @binding(7) var<storage, read_write> b7: array<f32>;
@group(0) @binding(8) var<storage, read_write> b8: array<f32>;

const NEG: f32 = -3.4028235e38;

// Block is a workgroup's work: sequence b, head h, slice s, and its rows r0 .. r0+TR−1.
struct Block {
    b: u32,
    h: u32,
    s: u32,
    r0: u32,
}

// blocks is the number of workgroups of one pass: B·NH·slices·⌈T/TR⌉.
fn blocks() -> u32 {
    return prm.B * prm.NH * prm.slices * ((prm.NQ + TR - 1u) / TR);
}

// block maps workgroup w (< blocks()) to its work.
fn block(w: u32) -> Block {
    let per = (prm.NQ + TR - 1u) / TR;
    let bhs = w / per;
    let bh = bhs % (prm.B * prm.NH);
    var k: Block;
    k.r0 = (w % per) * TR;
    k.s = bhs / (prm.B * prm.NH);
    k.h = bh % prm.NH;
    k.b = bh / prm.NH;
    return k;
}

// flat returns workgroup wg's index in a grid of any shape, row by row.
fn flat(wg: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wg.y * nwg.x + wg.x;
}

// span returns the partner rows [lo, hi) of slice s of the n partner rows from first on, in
// slices of whole tiles.
fn span(first: u32, n: u32, s: u32) -> vec2<u32> {
    let per = ((n + prm.slices - 1u) / prm.slices + TR - 1u) / TR * TR;
    let lo = min(first + s * per, first + n);
    return vec2<u32>(lo, min(lo + per, first + n));
}

// sw is the place of vec4 e of tile row r.
fn sw(r: u32, e: u32) -> u32 {
    return r * W4 + (e ^ (r & (W4 - 1u)));
}

// TileElem is element e of a tile (e < TR·W4·4, row by row): its place in the tile (a float
// index: vec4 at / 4, component at % 4), its offset in the source tensor and whether it holds
// data (false past HS).
struct TileElem {
    at: u32,
    src: u32,
    ok: bool,
}

// tileElem maps element e of the tile of rows r0.. of sequence b's rows of a tensor of rows ld
// floats long, head columns from col: rows from hi on repeat row hi − 1 (the callers mask them).
fn tileElem(e: u32, b: u32, r0: u32, hi: u32, col: u32, ld: u32) -> TileElem {
    let r = e / (4u * W4);
    let c = e % (4u * W4);
    var x: TileElem;
    x.at = sw(r, c / 4u) * 4u + c % 4u;
    x.ok = c < prm.HS;
    x.src = (b * prm.NQ + min(r0 + r, hi - 1u)) * ld + col + min(c, prm.HS - 1u);
    return x;
}

// Scores is a thread's 4×4 block of dot products: s[j][i] pairs row a+8i of one tile with row
// c+8j of the other.
struct Scores {
    s0: vec4<f32>,
    s1: vec4<f32>,
    s2: vec4<f32>,
    s3: vec4<f32>,
}

// dot4 returns the dot products of x0..x3 with y.
fn dot4(x0: vec4<f32>, x1: vec4<f32>, x2: vec4<f32>, x3: vec4<f32>, y: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(dot(x0, y), dot(x1, y), dot(x2, y), dot(x3, y));
}

// scoresAC returns the block of products of tA's rows a+8i with tC's rows c+8j; scoresBD the
// same of tB's with tD's.
fn scoresAC(a: u32, c: u32) -> Scores {
    var r: Scores;
    r.s0 = vec4<f32>(0.0);
    r.s1 = vec4<f32>(0.0);
    r.s2 = vec4<f32>(0.0);
    r.s3 = vec4<f32>(0.0);
    for (var e = 0u; e < HS4L; e++) {
        let x0 = tA[sw(a, e)];
        let x1 = tA[sw(a + 8u, e)];
        let x2 = tA[sw(a + 16u, e)];
        let x3 = tA[sw(a + 24u, e)];
        r.s0 += dot4(x0, x1, x2, x3, tC[sw(c, e)]);
        r.s1 += dot4(x0, x1, x2, x3, tC[sw(c + 8u, e)]);
        r.s2 += dot4(x0, x1, x2, x3, tC[sw(c + 16u, e)]);
        r.s3 += dot4(x0, x1, x2, x3, tC[sw(c + 24u, e)]);
    }
    return r;
}

fn scoresBD(a: u32, c: u32) -> Scores {
    var r: Scores;
    r.s0 = vec4<f32>(0.0);
    r.s1 = vec4<f32>(0.0);
    r.s2 = vec4<f32>(0.0);
    r.s3 = vec4<f32>(0.0);
    for (var e = 0u; e < HS4L; e++) {
        let x0 = tB[sw(a, e)];
        let x1 = tB[sw(a + 8u, e)];
        let x2 = tB[sw(a + 16u, e)];
        let x3 = tB[sw(a + 24u, e)];
        r.s0 += dot4(x0, x1, x2, x3, tD[sw(c, e)]);
        r.s1 += dot4(x0, x1, x2, x3, tD[sw(c + 8u, e)]);
        r.s2 += dot4(x0, x1, x2, x3, tD[sw(c + 16u, e)]);
        r.s3 += dot4(x0, x1, x2, x3, tD[sw(c + 24u, e)]);
    }
    return r;
}

// Rows4 is a thread's four vec4: vec4 column c of rows a+8i.
struct Rows4 {
    o0: vec4<f32>,
    o1: vec4<f32>,
    o2: vec4<f32>,
    o3: vec4<f32>,
}

fn zero4() -> Rows4 {
    return Rows4(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
}

// axpy4 returns o with w[i]·y added to row i.
fn axpy4(o: Rows4, w: vec4<f32>, y: vec4<f32>) -> Rows4 {
    return Rows4(fma(vec4<f32>(w.x), y, o.o0), fma(vec4<f32>(w.y), y, o.o1), fma(vec4<f32>(w.z), y, o.o2), fma(vec4<f32>(w.w), y, o.o3));
}

// scale4 returns o with row i multiplied by f[i].
fn scale4(o: Rows4, f: vec4<f32>) -> Rows4 {
    return Rows4(o.o0 * f.x, o.o1 * f.y, o.o2 * f.z, o.o3 * f.w);
}

// pw is the place of the probabilities of partner row kk for the four rows a+8i of thread
// group a (a vec4), in tD.
fn pw(kk: u32, a: u32) -> u32 {
    return kk * 8u + (a ^ (kk & 7u));
}

// put stores vec4 column c of a head, v, at elements at + 4c.. of b1, those before HS.
fn put(at: u32, c: u32, v: vec4<f32>) {
    let x = 4u * c;
    if (x < prm.HS) { b1[at + x] = v.x; }
    if (x + 1u < prm.HS) { b1[at + x + 1u] = v.y; }
    if (x + 2u < prm.HS) { b1[at + x + 2u] = v.z; }
    if (x + 3u < prm.HS) { b1[at + x + 3u] = v.w; }
}

// putRows stores o's rows r0+a+8i (those before T) of a tensor of rows ld floats long (sequence
// b's rows of it, from element base on), head columns from col.
fn putRows(o: Rows4, base: u32, b: u32, r0: u32, a: u32, c: u32, col: u32, ld: u32) {
    let r = r0 + a;
    let at = base + (b * prm.NQ + r) * ld + col;
    if (r < prm.NQ) { put(at, c, o.o0); }
    if (r + 8u < prm.NQ) { put(at + 8u * ld, c, o.o1); }
    if (r + 16u < prm.NQ) { put(at + 16u * ld, c, o.o2); }
    if (r + 24u < prm.NQ) { put(at + 24u * ld, c, o.o3); }
}

// rowsVec returns x[base + min(r + 8i, last)] for i = 0..3 (a row value of rows r+8i) of b2 or b8.
fn rowsB2(base: u32, r: u32, last: u32) -> vec4<f32> {
    return vec4<f32>(b2[base + min(r, last)], b2[base + min(r + 8u, last)], b2[base + min(r + 16u, last)], b2[base + min(r + 24u, last)]);
}

fn rowsB8(base: u32, r: u32, last: u32) -> vec4<f32> {
    return vec4<f32>(b8[base + min(r, last)], b8[base + min(r + 8u, last)], b8[base + min(r + 16u, last)], b8[base + min(r + 24u, last)]);
}

// visible returns, for queries q+8i against key k, whether the pair counts: k ≤ q+8i, the
// query before qhi and the key before khi (the ends of a slice's partners).
fn visible(q: u32, k: u32, qhi: u32, khi: u32) -> vec4<bool> {
    let qs = vec4<u32>(q, q + 8u, q + 16u, q + 24u);
    return (vec4<u32>(k) <= qs) & (qs < vec4<u32>(qhi)) & vec4<bool>(k < khi);
}

@compute @workgroup_size(64)
fn forward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let w = flat(wg, nwg);
    if (w >= blocks()) {
        return;
    }
    let k = block(w);
    let a = lid / 8u;
    let c = lid % 8u;
    let T = prm.NQ;
    let C3 = 3u * prm.C;
    let col = k.h * prm.HS;
    for (var e = lid; e < TR * W4 * 4u; e += 64u) {
        let x = tileElem(e, k.b, k.r0, T, col, C3);
        tA[x.at / 4u][x.at % 4u] = select(0.0, b3[x.src], x.ok);
    }
    var m = vec4<f32>(NEG); // rows a+8i: the running maxima, the same in all 8 threads of a row
    var l = vec4<f32>(0.0); // this thread's share of the running sums (keys c+8j of each tile)
    var o = zero4();
    let q = k.r0 + a;
    // The block's keys: 0 to its last query.
    let r = span(0u, min(T, k.r0 + TR), k.s);
    for (var k0 = r.x; k0 < r.y; k0 += TR) {
        workgroupBarrier();
        for (var e = lid; e < TR * W4 * 4u; e += 64u) {
            let x = tileElem(e, k.b, k0, r.y, prm.C + col, C3);
            tC[x.at / 4u][x.at % 4u] = select(0.0, b3[x.src], x.ok);
        }
        workgroupBarrier();
        let sc = scoresAC(a, c);
        let v0 = visible(q, k0 + c, T, r.y);
        let v1 = visible(q, k0 + c + 8u, T, r.y);
        let v2 = visible(q, k0 + c + 16u, T, r.y);
        let v3 = visible(q, k0 + c + 24u, T, r.y);
        let s0 = select(vec4<f32>(NEG), sc.s0 * prm.scale, v0);
        let s1 = select(vec4<f32>(NEG), sc.s1 * prm.scale, v1);
        let s2 = select(vec4<f32>(NEG), sc.s2 * prm.scale, v2);
        let s3 = select(vec4<f32>(NEG), sc.s3 * prm.scale, v3);
        tM[c * 8u + (a ^ c)] = max(max(s0, s1), max(s2, s3));
        workgroupBarrier();
        // Every thread has read its scores' keys from tC: v may replace k.
        for (var e = lid; e < TR * W4 * 4u; e += 64u) {
            let x = tileElem(e, k.b, k0, r.y, 2u * prm.C + col, C3);
            tC[x.at / 4u][x.at % 4u] = select(0.0, b3[x.src], x.ok);
        }
        var mn = m;
        for (var g = 0u; g < 8u; g++) {
            mn = max(mn, tM[g * 8u + (a ^ g)]);
        }
        let corr = exp(m - mn);
        let p0 = select(vec4<f32>(0.0), exp(s0 - mn), v0);
        let p1 = select(vec4<f32>(0.0), exp(s1 - mn), v1);
        let p2 = select(vec4<f32>(0.0), exp(s2 - mn), v2);
        let p3 = select(vec4<f32>(0.0), exp(s3 - mn), v3);
        l = l * corr + ((p0 + p1) + (p2 + p3));
        m = mn;
        tD[pw(c, a)] = p0;
        tD[pw(c + 8u, a)] = p1;
        tD[pw(c + 16u, a)] = p2;
        tD[pw(c + 24u, a)] = p3;
        o = scale4(o, corr);
        workgroupBarrier();
        if (c < HS4L) {
            for (var kk = 0u; kk < TR; kk++) {
                o = axpy4(o, tD[pw(kk, a)], tC[sw(kk, c)]);
            }
        }
    }
    // The rows' sums: the 8 threads' shares, added in order. (tM's last readers have passed
    // the loop's last barrier.)
    tM[c * 8u + (a ^ c)] = l;
    workgroupBarrier();
    var L = vec4<f32>(0.0);
    for (var g = 0u; g < 8u; g++) {
        L += tM[g * 8u + (a ^ g)];
    }
    if (c >= HS4L) {
        return;
    }
    let R = prm.B * prm.NH * T;
    let li = (k.b * prm.NH + k.h) * T + q;
    if (prm.slices > 1u) { // partial results for forward_merge
        putRows(o, k.s * prm.B * T * prm.C, k.b, k.r0, a, c, col, prm.C);
        if (c == 0u) {
            for (var i = 0u; i < 4u; i++) {
                if (q + 8u * i < T) {
                    b2[2u * k.s * R + li + 8u * i] = m[i];
                    b2[(2u * k.s + 1u) * R + li + 8u * i] = L[i];
                }
            }
        }
        return;
    }
    putRows(scale4(o, 1.0 / L), 0u, k.b, k.r0, a, c, col, prm.C);
    if (c == 0u && prm.saveLSE != 0u) {
        let lse = m + log(L);
        for (var i = 0u; i < 4u; i++) {
            if (q + 8u * i < T) {
                b2[li + 8u * i] = lse[i];
            }
        }
    }
}

// The backward pass, after attention.wgsl's backward_d has put D_i = dout_i·out_i in b2: one
// dispatch runs the dkdv blocks (the longer ones) and the dq blocks side by side, each kind
// alone leaving most of a large GPU idle.
@compute @workgroup_size(64)
fn backward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let n = blocks();
    let w = flat(wg, nwg);
    if (w < n) {
        dkdv(block(w), lid);
    } else if (w < 2u * n) {
        dq(block(w - n), lid);
    }
}

// Probs is a thread's 4×4 block of probabilities and of score gradients, s[j][i] as Scores.
struct Probs {
    p: Scores,
    ds: Scores,
}

// probs recomputes P = exp(S·scale − lse) and dS = P∘(dP − D)·scale for queries q+8i (whose
// lse and D are given) and keys k+8j, from the score products s and dp = dout·v; pairs
// visible (qhi, khi) does not count are zero.
fn probs(s: Scores, dp: Scores, lse: vec4<f32>, D: vec4<f32>, q: u32, k: u32, qhi: u32, khi: u32) -> Probs {
    var r: Probs;
    r.p.s0 = select(vec4<f32>(0.0), exp(s.s0 * prm.scale - lse), visible(q, k, qhi, khi));
    r.p.s1 = select(vec4<f32>(0.0), exp(s.s1 * prm.scale - lse), visible(q, k + 8u, qhi, khi));
    r.p.s2 = select(vec4<f32>(0.0), exp(s.s2 * prm.scale - lse), visible(q, k + 16u, qhi, khi));
    r.p.s3 = select(vec4<f32>(0.0), exp(s.s3 * prm.scale - lse), visible(q, k + 24u, qhi, khi));
    r.ds.s0 = r.p.s0 * (dp.s0 - D) * prm.scale;
    r.ds.s1 = r.p.s1 * (dp.s1 - D) * prm.scale;
    r.ds.s2 = r.p.s2 * (dp.s2 - D) * prm.scale;
    r.ds.s3 = r.p.s3 * (dp.s3 - D) * prm.scale;
    return r;
}

// dkdv: dV_j = Σ_{i≥j} P_ij·dout_i and dK_j = Σ_{i≥j} dS_ij·q_i for block k's keys, over query
// tiles (q into tA, dout into tB, the block's k and v into tC and tD, which then take Pᵀ and
// dSᵀ: row i of the tile at i·8 + a holds keys a+8j).
fn dkdv(k: Block, lid: u32) {
    let a = lid / 8u;
    let c = lid % 8u;
    let T = prm.NQ;
    let C3 = 3u * prm.C;
    let col = k.h * prm.HS;
    let lbase = (k.b * prm.NH + k.h) * T;
    var dv = zero4();
    var dk = zero4();
    // The block's queries: its first key to the end.
    let r = span(k.r0, T - k.r0, k.s);
    let kend = min(T, k.r0 + TR);
    for (var q0 = r.x; q0 < r.y; q0 += TR) {
        workgroupBarrier();
        for (var e = lid; e < TR * W4 * 4u; e += 64u) {
            let x = tileElem(e, k.b, q0, r.y, col, C3);
            tA[x.at / 4u][x.at % 4u] = select(0.0, b4[x.src], x.ok);
            let y = tileElem(e, k.b, q0, r.y, col, prm.C);
            tB[y.at / 4u][y.at % 4u] = select(0.0, b3[y.src], y.ok);
            let z = tileElem(e, k.b, k.r0, kend, prm.C + col, C3);
            tC[z.at / 4u][z.at % 4u] = select(0.0, b4[z.src], z.ok);
            tD[z.at / 4u][z.at % 4u] = select(0.0, b4[z.src + prm.C], z.ok);
        }
        workgroupBarrier();
        let q = q0 + a;
        let lse = rowsB8(lbase, q, r.y - 1u);
        let D = rowsB2(lbase, q, r.y - 1u);
        let pr = probs(scoresAC(a, c), scoresBD(a, c), lse, D, q, k.r0 + c, r.y, T);
        workgroupBarrier();
        for (var i = 0u; i < 4u; i++) {
            let at = (a + 8u * i) * 8u + c;
            tC[at] = vec4<f32>(pr.p.s0[i], pr.p.s1[i], pr.p.s2[i], pr.p.s3[i]);
            tD[at] = vec4<f32>(pr.ds.s0[i], pr.ds.s1[i], pr.ds.s2[i], pr.ds.s3[i]);
        }
        workgroupBarrier();
        if (c < HS4L) {
            for (var ii = 0u; ii < TR; ii++) {
                dv = axpy4(dv, tC[ii * 8u + a], tB[sw(ii, c)]);
                dk = axpy4(dk, tD[ii * 8u + a], tA[sw(ii, c)]);
            }
        }
    }
    if (c >= HS4L) {
        return;
    }
    let base = k.s * prm.B * T * C3;
    putRows(dk, base, k.b, k.r0, a, c, prm.C + col, C3);
    putRows(dv, base, k.b, k.r0, a, c, 2u * prm.C + col, C3);
}

// dq: dQ_i = Σ_{j≤i} dS_ij·k_j for block k's queries, over key tiles (the block's q and dout in
// tA and tB, k and v into tC and tD, dS then replacing v at pw).
fn dq(k: Block, lid: u32) {
    let a = lid / 8u;
    let c = lid % 8u;
    let T = prm.NQ;
    let C3 = 3u * prm.C;
    let col = k.h * prm.HS;
    for (var e = lid; e < TR * W4 * 4u; e += 64u) {
        let x = tileElem(e, k.b, k.r0, T, col, C3);
        tA[x.at / 4u][x.at % 4u] = select(0.0, b4[x.src], x.ok);
        let y = tileElem(e, k.b, k.r0, T, col, prm.C);
        tB[y.at / 4u][y.at % 4u] = select(0.0, b3[y.src], y.ok);
    }
    let q = k.r0 + a;
    let lbase = (k.b * prm.NH + k.h) * T;
    let lse = rowsB8(lbase, q, T - 1u);
    let D = rowsB2(lbase, q, T - 1u);
    var d = zero4();
    // The block's keys: 0 to its last query.
    let r = span(0u, min(T, k.r0 + TR), k.s);
    for (var k0 = r.x; k0 < r.y; k0 += TR) {
        workgroupBarrier();
        for (var e = lid; e < TR * W4 * 4u; e += 64u) {
            let x = tileElem(e, k.b, k0, r.y, prm.C + col, C3);
            tC[x.at / 4u][x.at % 4u] = select(0.0, b4[x.src], x.ok);
            tD[x.at / 4u][x.at % 4u] = select(0.0, b4[x.src + prm.C], x.ok);
        }
        workgroupBarrier();
        let pr = probs(scoresAC(a, c), scoresBD(a, c), lse, D, q, k0 + c, T, r.y);
        workgroupBarrier();
        tD[pw(c, a)] = pr.ds.s0;
        tD[pw(c + 8u, a)] = pr.ds.s1;
        tD[pw(c + 16u, a)] = pr.ds.s2;
        tD[pw(c + 24u, a)] = pr.ds.s3;
        workgroupBarrier();
        if (c < HS4L) {
            for (var kk = 0u; kk < TR; kk++) {
                d = axpy4(d, tD[pw(kk, a)], tC[sw(kk, c)]);
            }
        }
    }
    if (c < HS4L) {
        putRows(d, k.s * prm.B * T * C3, k.b, k.r0, a, c, col, C3);
    }
}
