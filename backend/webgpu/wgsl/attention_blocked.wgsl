// Attention's backward pass in blocks, for heads of up to 32 (attention.wgsl has the math, the
// forward pass, backward_d and the backward pass for wider heads; attention_params.wgsl the
// parameters and bindings). A workgroup of 128 threads takes a block of 32 rows (keys for dk and
// dv, queries for dq) and walks its partners in tiles of 32, the tile's rows copied to
// workgroup memory by all the threads together (consecutive threads reading consecutive
// memory; the next tile's loads are issued before the current tile is used):
//   first, the block's own rows (k and v for keys, q and dout for queries) come through the
//     tiles the same way, and each thread keeps two of them in registers (read one thread a
//     row, straight from memory, the pass took ~10 µs longer inside a training step);
//   phase A: each thread computes the scores and dout·v of its 2 block rows × 4 of the tile's
//     partners (eight multiply-adds for each read of workgroup memory), then
//     p = exp(score·scale − lse) and ds = p·(dout·v − D)·scale into workgroup memory;
//   phase B: each thread adds to one vec4 of 4 block rows' sums over half the tile's partners
//     (16, in order): dv += p·dout and dk += ds·q (keys), dq += ds·k (queries); at the end
//     the two halves' sums are added, the first half's first.
// Key blocks and query blocks run side by side in one dispatch, the longest first: key block j
// walks the tiles from its own to the last (nb − j of nb), query block j the first j + 1, so
// the grid holds, for c = 0, 1, ..., nb − 1, every (sequence, head, slice)'s key block c and
// then its query block nb − 1 − c, each nb − c tiles long (split among the slices, if any).
// The GPU starts workgroups in grid order and holds only two of these at once per SM (their
// registers), so the short blocks fill the end of the pass. (In the order of rows, key blocks
// first, the pass took 17% longer at xl's shape on an H200: BenchmarkAttention,
// docs/performance.md, 2026-11-27.) Slices split a block's tiles as in attention.wgsl (each
// slice's partial sums at element offset s·B·NQ·3C of b1, added in order by matmul.wgsl's
// reduce).
//
// Against attention.wgsl's backward (one thread a row, one multiply-add a read) on an H100,
// the pass with its D pass: large's shape 58 → 42 µs alone and 62–64 → 55–57 inside a step,
// huge's 109 → 89, one sequence 38 → 19 (docs/performance.md, 2026-11-27).

const HS4: u32 = HS4u; // vec4 of a head row (zero past HS)
const BT: u32 = 32u;   // rows of a block and of a tile
const WG: u32 = 128u;

// The tile's rows, [BT][HS4]: q and dout (key blocks) or k and v (query blocks); and the
// tile's p and ds as [BT][8] vec4: key blocks [partner][4 keys], query blocks (ds only)
// [partner][4 queries]. 16 KB at head size 32. Every element is written before it is read
// (workgroup memory is not zeroed on Vulkan: internal/gpu/zeroinit.go).
var<workgroup> tx: array<vec4<f32>, TXVu>;
var<workgroup> ty: array<vec4<f32>, TXVu>;
var<workgroup> tp: array<vec4<f32>, 256>;
var<workgroup> ts: array<vec4<f32>, 256>;

// Block is a workgroup's block: sequence b, head h (bh = b·NH + h), slice s, first row r0, and
// its tiles [lo, hi).
struct Block {
    b: u32,
    h: u32,
    bh: u32,
    s: u32,
    r0: u32,
    lo: u32,
    hi: u32,
}

// block maps workgroup w of a pass to its block; keys walk the tiles from their own to the
// last, queries from the first to their own.
fn block(w: u32, keys: bool) -> Block {
    let T = prm.NQ;
    let nb = (T + BT - 1u) / BT;
    var k: Block;
    let j = w % nb;
    let rest = w / nb;
    k.bh = rest % (prm.B * prm.NH);
    k.s = rest / (prm.B * prm.NH);
    k.b = k.bh / prm.NH;
    k.h = k.bh % prm.NH;
    k.r0 = j * BT;
    let first = select(0u, j, keys);
    let count = select(j + 1u, nb - j, keys);
    let per = (count + prm.slices - 1u) / prm.slices;
    k.lo = first + min(k.s * per, count);
    k.hi = first + min((k.s + 1u) * per, count);
    return k;
}

// A tile's rows in flight: element lid + WG·m (m < HS4) of each tensor's 32 rows × 4·HS4.
struct Fetched {
    x: array<f32, HS4>,
    y: array<f32, HS4>,
}

// fetchTile loads this thread's share of rows p0 .. p0+31 of sequence b (a tile of partners or
// the block's own rows; rows past the last repeat it): of column cx of qkv (b4) for tx, of column cy of qkv (yQKV) or of dout (b3)
// for ty, all loads issued before any is used; putTile stores them (zero past HS).
fn fetchTile(b: u32, p0: u32, cx: u32, cy: u32, yQKV: bool, lid: u32) -> Fetched {
    let T = prm.NQ;
    let w = HS4 * 4u;
    var f: Fetched;
    for (var m = 0u; m < HS4; m++) {
        let e = lid + WG * m;
        let r = b * T + min(p0 + e / w, T - 1u);
        let cc = min(e % w, prm.HS - 1u);
        f.x[m] = b4[r * 3u * prm.C + cx + cc];
        if (yQKV) {
            f.y[m] = b4[r * 3u * prm.C + cy + cc];
        } else {
            f.y[m] = b3[r * prm.C + cy + cc];
        }
    }
    return f;
}

// LD holds lse and D of four consecutive queries.
struct LD {
    lse: vec4<f32>,
    D: vec4<f32>,
}

// fetchLD loads lse and D of queries i .. i+3 (from element lbase of both; queries past the
// last repeat it).
fn fetchLD(lbase: u32, i: u32) -> LD {
    let T = prm.NQ;
    let c = lbase + min(vec4<u32>(i, i + 1u, i + 2u, i + 3u), vec4<u32>(T - 1u));
    var r: LD;
    r.lse = vec4<f32>(b8[c.x], b8[c.y], b8[c.z], b8[c.w]);
    r.D = vec4<f32>(b2[c.x], b2[c.y], b2[c.z], b2[c.w]);
    return r;
}

fn putTile(f: Fetched, lid: u32) {
    let w = HS4 * 4u;
    for (var m = 0u; m < HS4; m++) {
        let e = lid + WG * m;
        let ok = e % w < prm.HS;
        tx[e / 4u][e % 4u] = select(0.0, f.x[m], ok);
        ty[e / 4u][e % 4u] = select(0.0, f.y[m], ok);
    }
}

// Dots are phase A's sums of one thread: its two own rows against four rows of the tile.
struct Dots {
    s0: vec4<f32>,
    s1: vec4<f32>,
    e0: vec4<f32>,
    e1: vec4<f32>,
}

// tileDots returns the dot products of the own rows a0 and a1 (k, or q) with the tile's rows
// r/HS4 .. r/HS4+3 in tx (q, or k), and of b0 and b1 (v, or dout) with those in ty (dout, or
// v): s0[m] = a0·tx row m, s1 a1's, e0 and e1 the same of b0, b1 with ty.
fn tileDots(r: u32, a0: array<vec4<f32>, HS4>, a1: array<vec4<f32>, HS4>, b0: array<vec4<f32>, HS4>, b1: array<vec4<f32>, HS4>) -> Dots {
    var d = Dots(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
    for (var e = 0u; e < HS4; e++) {
        let x0 = tx[r + e];
        let x1 = tx[r + HS4 + e];
        let x2 = tx[r + 2u * HS4 + e];
        let x3 = tx[r + 3u * HS4 + e];
        let y0 = ty[r + e];
        let y1 = ty[r + HS4 + e];
        let y2 = ty[r + 2u * HS4 + e];
        let y3 = ty[r + 3u * HS4 + e];
        d.s0 += vec4<f32>(dot(x0, a0[e]), dot(x1, a0[e]), dot(x2, a0[e]), dot(x3, a0[e]));
        d.s1 += vec4<f32>(dot(x0, a1[e]), dot(x1, a1[e]), dot(x2, a1[e]), dot(x3, a1[e]));
        d.e0 += vec4<f32>(dot(y0, b0[e]), dot(y1, b0[e]), dot(y2, b0[e]), dot(y3, b0[e]));
        d.e1 += vec4<f32>(dot(y0, b1[e]), dot(y1, b1[e]), dot(y2, b1[e]), dot(y3, b1[e]));
    }
    return d;
}

@compute @workgroup_size(128)
fn backward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let nb = (prm.NQ + BT - 1u) / BT;
    let bhs = prm.B * prm.NH * prm.slices;
    let w = wg.y * nwg.x + wg.x;
    if (w < 2u * bhs * nb) {
        let c = w / (2u * bhs);
        let r = w % (2u * bhs);
        if (r < bhs) {
            keyBlock(r * nb + c, lid);
        } else {
            queryBlock((r - bhs) * nb + nb - 1u - c, lid);
        }
    }
}

// keyBlock: dv_j = Σ_{i≥j} p_ij·dout_i and dk_j = scale·Σ_{i≥j} p_ij·(dout_i·v_j − D_i)·q_i for
// the block's keys j.
fn keyBlock(w: u32, lid: u32) {
    let k = block(w, true);
    let T = prm.NQ;
    let C3 = 3u * prm.C;
    let col = k.h * prm.HS;
    // Phase A: keys 2·kp and 2·kp+1 of the block, the tile's queries 4·qq .. 4·qq+3.
    let kp = lid % 16u;
    let qq = lid / 16u;
    let j0 = k.r0 + 2u * kp;
    var k0: array<vec4<f32>, HS4>;
    var k1: array<vec4<f32>, HS4>;
    var v0: array<vec4<f32>, HS4>;
    var v1: array<vec4<f32>, HS4>;
    {
        // The block's own k and v rows, through the tiles.
        let own = fetchTile(k.b, k.r0, prm.C + col, 2u * prm.C + col, true, lid);
        putTile(own, lid);
        workgroupBarrier();
        for (var e = 0u; e < HS4; e++) {
            k0[e] = tx[2u * kp * HS4 + e];
            k1[e] = tx[(2u * kp + 1u) * HS4 + e];
            v0[e] = ty[2u * kp * HS4 + e];
            v1[e] = ty[(2u * kp + 1u) * HS4 + e];
        }
    }
    // Phase B: keys 4·kq .. 4·kq+3, vec4 d of their sums, the tile's queries 16·half ...
    let half = lid / 64u;
    let kq = lid % 8u;
    let d = (lid % 64u) / 8u;
    var dk: array<vec4<f32>, 4>;
    var dv: array<vec4<f32>, 4>;
    for (var m = 0u; m < 4u; m++) {
        dk[m] = vec4<f32>(0.0);
        dv[m] = vec4<f32>(0.0);
    }
    let lbase = k.bh * T;
    var f = fetchTile(k.b, k.lo * BT, col, col, false, lid); // q, dout
    var g = fetchLD(lbase, k.lo * BT + 4u * qq); // lse and D of this thread's four queries
    for (var t = k.lo; t < k.hi; t++) {
        let p0 = t * BT;
        workgroupBarrier();
        putTile(f, lid);
        workgroupBarrier();
        // A var, not a let: naga v0.18.0 compiles `let x = g;` followed by `g = ...` and a use
        // of x.lse as a read of g's new value (an access chain into g, not the loaded copy).
        var lseD = g;
        if (t + 1u < k.hi) { // the next tile's loads in flight during this one
            f = fetchTile(k.b, p0 + BT, col, col, false, lid);
            g = fetchLD(lbase, p0 + BT + 4u * qq);
        }
        let ab = tileDots(4u * qq * HS4, k0, k1, v0, v1);
        let s0 = ab.s0; // key j0 against the four queries
        let s1 = ab.s1;
        let e0 = ab.e0; // dout·v
        let e1 = ab.e1;
        for (var q = 0u; q < 4u; q++) {
            let qi = 4u * qq + q;
            let i = p0 + qi;
            let lse = lseD.lse[q];
            let D = lseD.D[q];
            let p0v = select(0.0, exp(s0[q] * prm.scale - lse), i < T && j0 <= i);
            let p1v = select(0.0, exp(s1[q] * prm.scale - lse), i < T && j0 + 1u <= i);
            let c = 2u * (kp % 2u);
            tp[qi * 8u + kp / 2u][c] = p0v;
            tp[qi * 8u + kp / 2u][c + 1u] = p1v;
            ts[qi * 8u + kp / 2u][c] = p0v * (e0[q] - D) * prm.scale;
            ts[qi * 8u + kp / 2u][c + 1u] = p1v * (e1[q] - D) * prm.scale;
        }
        workgroupBarrier();
        if (d < HS4) {
            for (var qi = 16u * half; qi < 16u * half + 16u; qi++) {
                let p = tp[qi * 8u + kq];
                let ds = ts[qi * 8u + kq];
                let o = ty[qi * HS4 + d];
                let x = tx[qi * HS4 + d];
                for (var m = 0u; m < 4u; m++) {
                    dv[m] = fma(vec4<f32>(p[m]), o, dv[m]);
                    dk[m] = fma(vec4<f32>(ds[m]), x, dk[m]);
                }
            }
        }
    }
    // The second half's sums to the first's, through tp and ts: [key][vec4 d].
    workgroupBarrier();
    if (half == 1u && d < HS4) {
        for (var m = 0u; m < 4u; m++) {
            tp[(4u * kq + m) * 8u + d] = dv[m];
            ts[(4u * kq + m) * 8u + d] = dk[m];
        }
    }
    workgroupBarrier();
    if (half == 0u && d < HS4) {
        for (var m = 0u; m < 4u; m++) {
            let j = k.r0 + 4u * kq + m;
            if (j < T) {
                let out = k.s * prm.B * T * C3 + (k.b * T + j) * C3 + col;
                put1(out + prm.C, d, dk[m] + ts[(4u * kq + m) * 8u + d]);
                put1(out + 2u * prm.C, d, dv[m] + tp[(4u * kq + m) * 8u + d]);
            }
        }
    }
}

// queryBlock: dq_i = scale·Σ_{j≤i} p_ij·(dout_i·v_j − D_i)·k_j for the block's queries i.
fn queryBlock(w: u32, lid: u32) {
    let k = block(w, false);
    let T = prm.NQ;
    let C3 = 3u * prm.C;
    let col = k.h * prm.HS;
    // Phase A: queries 2·qp and 2·qp+1 of the block, the tile's keys 4·kq .. 4·kq+3.
    let qp = lid % 16u;
    let kq = lid / 16u;
    let i0 = k.r0 + 2u * qp;
    let ic0 = min(i0, T - 1u);
    let ic1 = min(i0 + 1u, T - 1u);
    var q0: array<vec4<f32>, HS4>;
    var q1: array<vec4<f32>, HS4>;
    var o0: array<vec4<f32>, HS4>;
    var o1: array<vec4<f32>, HS4>;
    {
        // The block's own q and dout rows, through the tiles.
        let own = fetchTile(k.b, k.r0, col, col, false, lid);
        putTile(own, lid);
        workgroupBarrier();
        for (var e = 0u; e < HS4; e++) {
            q0[e] = tx[2u * qp * HS4 + e];
            q1[e] = tx[(2u * qp + 1u) * HS4 + e];
            o0[e] = ty[2u * qp * HS4 + e];
            o1[e] = ty[(2u * qp + 1u) * HS4 + e];
        }
    }
    let lse0 = b8[k.bh * T + ic0];
    let lse1 = b8[k.bh * T + ic1];
    let D0 = b2[k.bh * T + ic0];
    let D1 = b2[k.bh * T + ic1];
    // Phase B: queries 4·qv .. 4·qv+3, vec4 d of their sums, the tile's keys 16·half ...
    let half = lid / 64u;
    let qv = lid % 8u;
    let d = (lid % 64u) / 8u;
    var dq: array<vec4<f32>, 4>;
    for (var m = 0u; m < 4u; m++) {
        dq[m] = vec4<f32>(0.0);
    }
    var f = fetchTile(k.b, k.lo * BT, prm.C + col, 2u * prm.C + col, true, lid); // k, v
    for (var t = k.lo; t < k.hi; t++) {
        let p0 = t * BT;
        workgroupBarrier();
        putTile(f, lid);
        workgroupBarrier();
        if (t + 1u < k.hi) { // the next tile's loads in flight during this one
            f = fetchTile(k.b, p0 + BT, prm.C + col, 2u * prm.C + col, true, lid);
        }
        let ab = tileDots(4u * kq * HS4, q0, q1, o0, o1);
        let s0 = ab.s0; // query i0 against the four keys
        let s1 = ab.s1;
        let e0 = ab.e0; // dout·v
        let e1 = ab.e1;
        let c = 2u * (qp % 2u);
        for (var q = 0u; q < 4u; q++) {
            let kj = 4u * kq + q;
            let j = p0 + kj;
            let p0v = select(0.0, exp(s0[q] * prm.scale - lse0), i0 < T && j <= i0);
            let p1v = select(0.0, exp(s1[q] * prm.scale - lse1), i0 + 1u < T && j <= i0 + 1u);
            ts[kj * 8u + qp / 2u][c] = p0v * (e0[q] - D0) * prm.scale;
            ts[kj * 8u + qp / 2u][c + 1u] = p1v * (e1[q] - D1) * prm.scale;
        }
        workgroupBarrier();
        if (d < HS4) {
            for (var kj = 16u * half; kj < 16u * half + 16u; kj++) {
                let ds = ts[kj * 8u + qv];
                let x = tx[kj * HS4 + d];
                for (var m = 0u; m < 4u; m++) {
                    dq[m] = fma(vec4<f32>(ds[m]), x, dq[m]);
                }
            }
        }
    }
    workgroupBarrier();
    if (half == 1u && d < HS4) {
        for (var m = 0u; m < 4u; m++) {
            ts[(4u * qv + m) * 8u + d] = dq[m];
        }
    }
    workgroupBarrier();
    if (half == 0u && d < HS4) {
        for (var m = 0u; m < 4u; m++) {
            let i = k.r0 + 4u * qv + m;
            if (i < T) {
                put1(k.s * prm.B * T * C3 + (k.b * T + i) * C3 + col, d, dq[m] + ts[(4u * qv + m) * 8u + d]);
            }
        }
    }
}
