// Causal multi-head attention, flash style: no T×T matrix is ever stored. One thread per
// (sequence, head, row, slice): the forward pass streams over a query's keys with an online
// softmax (a running maximum m, a running sum l and a running weighted sum of values, rescaled
// whenever m grows) and saves lse = m + log(l); the backward pass recomputes each probability
// as exp(score − lse).
//
// A workgroup is a block of 64 consecutive rows of one head (and slice), and all its threads
// walk the same partner rows (keys for a query, queries for a key) in the same order, those the
// causal mask hides counting zero: tiles of KT partner rows are copied to workgroup memory by
// all the threads together (coalesced), then every thread reads the same vec4 of the tile at
// the same time (one broadcast read for all). Partners go four at a time, four independent dot
// products in flight per thread. The forward pass first copies the block's own query rows the
// same way, through tileX, and each thread takes its row from there (2026-11-27: read one
// thread a row, huge's pass took 37.7 µs instead of 33.3 on an H100, large's step 0.6% longer).
// In the forward pass each row may have several threads, its LANES (thread ln·64 + r is lane
// ln of the block's row r, so a warp's threads share a lane): lane ln takes the groups of four
// keys ln, ln + LANES, ... of every tile, which shortens the row's chain of dependent steps,
// and at the end the lanes' partial results are merged into lane 0's through workgroup
// memory, one lane after another in order. When rows are few for a
// large GPU, each row's partners are also split into slices, each in workgroups of its own,
// whose partial results are combined in slice order (forward_merge; the backward's partial sums
// by the reduce kernel of matmul.wgsl).
//
// q, k and v are the column blocks of one [rows, 3C] tensor (the input projection's output),
// read in place, and dq, dk and dv are written as the column blocks of one such tensor; out and
// dout are [rows, C]. Heads are column blocks of width HS of each, held as HS4 = ⌈HS/4⌉ vec4
// (zero past HS). For the usual head sizes (up to 64) the Go side compiles a kernel per size, HS4L
// and the per-thread arrays' size HS4_MAX being that size's, so that the loops over a head
// unroll and the arrays stay in registers (with a bound known only at run time they live in
// memory: several times slower on an NVIDIA H100). Wider heads share one kernel: HS4_MAX = 64
// and HS4L computed from prm.HS. KT, the tile's rows, keeps the two tiles within 16 KB.

const HS4_MAX: u32 = HS4MAXu;
const KT: u32 = KTu;
// The forward pass's threads per row (1 in the other entry points, whose workgroups are 64
// threads), and its loads in flight per thread and tensor while it copies a tile.
const LANES: u32 = LANESu;
const CP: u32 = CPu;

// Every tile element is copied before a thread reads it: workgroup memory is not zeroed on
// Vulkan (internal/gpu/zeroinit.go).
var<workgroup> tileX: array<vec4<f32>, TILEVu>; // [KT][HS4L]: k or q rows
var<workgroup> tileY: array<vec4<f32>, TILEVu>; // [KT][HS4L]: v or dout rows

// Task is a thread's work: sequence b, head h, slice s, row i (row r of its block) and lane ln
// of the row; ok is false for a thread past the last row (it still helps to copy tiles).
struct Task {
    b: u32,
    h: u32,
    i: u32,
    s: u32,
    r: u32,
    ln: u32,
    ok: bool,
}

// flat returns workgroup wg's index in a grid of any shape, row by row.
fn flat(wg: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wg.y * nwg.x + wg.x;
}

// blockOf returns the first row of workgroup w's block of 64 rows and its slice. They are the
// same for all the workgroup's threads, as WGSL's uniformity rules require of the bounds of a
// loop that holds barriers; a value derived from Task, which holds per-thread fields, is not
// (the browser's shader compiler rejects the kernel).
fn blockOf(w: u32, rows: u32) -> vec2<u32> {
    let blocks = (rows + 63u) / 64u;
    return vec2<u32>((w % blocks) * 64u, w / blocks / (prm.B * prm.NH));
}

// task maps workgroup w to a block of 64 rows of one (slice, sequence, head) and thread lid to
// a row and lane.
fn task(w: u32, lid: u32, rows: u32) -> Task {
    let blocks = (rows + 63u) / 64u;
    let bhs = w / blocks;
    let blk = blockOf(w, rows);
    var t: Task;
    t.s = blk.y;
    t.r = lid % 64u;
    t.ln = lid / 64u;
    t.i = blk.x + t.r;
    t.ok = t.i < rows;
    t.i = min(t.i, rows - 1u);
    let bh = bhs % (prm.B * prm.NH);
    t.h = bh % prm.NH;
    t.b = bh / prm.NH;
    return t;
}

// longestFirst maps position w of a grid of groups(rows) workgroups to the workgroup index
// task and blockOf take, so that the grid starts with every (slice, sequence, head)'s last
// block of rows, then their second last, and so on: in the forward pass a block's queries see
// more keys the later it comes, and the GPU starts workgroups in grid order. (H200,
// BenchmarkAttention against blocks in row order: large's shape 21.2 → 19.2 µs, huge's 33.0 →
// 29.2, but xl's 14.1 → 15.3, whose 128 workgroups are one an SM whatever their order; steps
// large and huge 0.5–0.7% faster, xl the same: docs/performance.md, 2026-11-27.)
fn longestFirst(w: u32, rows: u32) -> u32 {
    let blocks = (rows + 63u) / 64u;
    let n = groups(rows) / blocks;
    return (w % n) * blocks + blocks - 1u - w / n;
}

// groups is the number of workgroups of a pass over rows rows: B·NH·slices·blocks.
fn groups(rows: u32) -> u32 {
    return prm.B * prm.NH * prm.slices * ((rows + 63u) / 64u);
}

// span returns the partner rows [lo, hi) of slice s of the n partner rows from first on, in
// slices of equal length (a multiple of 4).
fn span(first: u32, n: u32, s: u32) -> vec2<u32> {
    let per = ((n + prm.slices - 1u) / prm.slices + 3u) / 4u * 4u;
    let lo = min(first + s * per, first + n);
    return vec2<u32>(lo, min(lo + per, first + n));
}

// tileSource returns, for element e of a tile of partner rows from j0 of sequence b (rows per
// sequence), the element's place in the tile ([row][vec4].component, flat) and its offset in
// a tensor of rows ld floats long at column col, and whether it holds data (false past HS):
// the tile's rows past hi repeat the row hi − 1, which the causal mask hides.
struct TileElem {
    at: u32,
    src: u32,
    ok: bool,
}

fn tileSource(e: u32, b: u32, rows: u32, j0: u32, hi: u32, col: u32, ld: u32) -> TileElem {
    let w = HS4L * 4u;
    let r = e / w;
    let c = e % w;
    var x: TileElem;
    x.at = e;
    x.ok = c < prm.HS;
    x.src = (b * rows + min(j0 + r, hi - 1u)) * ld + col + min(c, prm.HS - 1u);
    return x;
}

// head4 returns the vec4 of elements c..c+3 of a head, zero past HS.
fn head4(x0: f32, x1: f32, x2: f32, x3: f32, c: u32) -> vec4<f32> {
    return select(vec4<f32>(0.0), vec4<f32>(x0, x1, x2, x3), vec4<u32>(c, c + 1u, c + 2u, c + 3u) < vec4<u32>(prm.HS));
}

const NEG: f32 = -3.4028234e38;

// dotsX returns the dot products of x with vec4 e of tile rows r..r+3 of tileX, at = r·HS4L + e;
// dotsY the same over tileY.
fn dotsX(x: vec4<f32>, at: u32) -> vec4<f32> {
    return vec4<f32>(dot(x, tileX[at]), dot(x, tileX[at + HS4L]), dot(x, tileX[at + 2u * HS4L]), dot(x, tileX[at + 3u * HS4L]));
}

fn dotsY(x: vec4<f32>, at: u32) -> vec4<f32> {
    return vec4<f32>(dot(x, tileY[at]), dot(x, tileY[at + HS4L]), dot(x, tileY[at + 2u * HS4L]), dot(x, tileY[at + 3u * HS4L]));
}

// addX returns acc + Σ_q w[q]·(vec4 e of tile row r+q of tileX), at = r·HS4L + e, rows in
// order; addY the same over tileY.
fn addX(w: vec4<f32>, at: u32, acc: vec4<f32>) -> vec4<f32> {
    return fma(vec4<f32>(w.w), tileX[at + 3u * HS4L], fma(vec4<f32>(w.z), tileX[at + 2u * HS4L],
        fma(vec4<f32>(w.y), tileX[at + HS4L], fma(vec4<f32>(w.x), tileX[at], acc))));
}

fn addY(w: vec4<f32>, at: u32, acc: vec4<f32>) -> vec4<f32> {
    return fma(vec4<f32>(w.w), tileY[at + 3u * HS4L], fma(vec4<f32>(w.z), tileY[at + 2u * HS4L],
        fma(vec4<f32>(w.y), tileY[at + HS4L], fma(vec4<f32>(w.x), tileY[at], acc))));
}

// copyTile copies rows j0 .. j0+KT−1 of sequence b (rows past hi − 1 repeat it) of the head at
// column col of qkv (b3) into tileX, and with both the head C columns further (v after k) into
// tileY, the workgroup's threads together, in rounds of CP elements of each per thread whose
// loads are all issued before their stores (copied one at a time, each load's wait was about
// a tenth of the forward pass).
fn copyTile(lid: u32, b: u32, j0: u32, hi: u32, col: u32, both: bool) {
    let n = KT * HS4L * 4u;
    for (var e0 = lid; e0 < n; e0 += CP * 64u * LANES) {
        var vx: array<f32, CP>;
        var vy: array<f32, CP>;
        for (var q = 0u; q < CP; q++) {
            let x = tileSource(min(e0 + q * 64u * LANES, n - 1u), b, prm.TK, j0, hi, col, 3u * prm.C);
            vx[q] = select(0.0, b3[x.src], x.ok);
            if (both) {
                vy[q] = select(0.0, b3[x.src + prm.C], x.ok);
            }
        }
        for (var q = 0u; q < CP; q++) {
            let e = e0 + q * 64u * LANES;
            if (e < n) {
                tileX[e / 4u][e % 4u] = vx[q];
                if (both) {
                    tileY[e / 4u][e % 4u] = vy[q];
                }
            }
        }
    }
}

@compute @workgroup_size(WGn) // 64·LANES
fn forward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let w0 = flat(wg, nwg);
    if (w0 >= groups(prm.NQ)) {
        return;
    }
    let w = longestFirst(w0, prm.NQ);
    let t = task(w, lid, prm.NQ);
    let col = t.h * prm.HS;
    let qrow = (t.b * prm.NQ + t.i) * prm.C + col; // the output's row
    var qv: array<vec4<f32>, HS4_MAX>;
    var acc: array<vec4<f32>, HS4_MAX>;
    for (var e = 0u; e < HS4L; e++) {
        acc[e] = vec4<f32>(0.0);
    }
    let blk = blockOf(w, prm.NQ);
    // The block's own queries, through tileX a tile at a time, copied as the keys are below
    // (one thread a row, each load of a warp touched 32 rows).
    let own = min(64u, prm.NQ - blk.x);
    for (var r0 = 0u; r0 < own; r0 += KT) {
        workgroupBarrier();
        copyTile(lid, t.b, prm.P0 + blk.x + r0, prm.P0 + blk.x + own, col, false);
        workgroupBarrier();
        if (t.r >= r0 && t.r < r0 + KT) {
            for (var e = 0u; e < HS4L; e++) {
                qv[e] = tileX[(t.r - r0) * HS4L + e];
            }
        }
    }
    var m = NEG;
    var l = 0.0;
    let last = t.i + prm.P0; // the query's position: keys 0..last are visible
    // The block's keys: 0 to its last query's position.
    let r = span(0u, min(prm.TK, min(blk.x + 64u, prm.NQ) + prm.P0), blk.y);
    for (var j0 = r.x; j0 < r.y; j0 += KT) {
        workgroupBarrier();
        copyTile(lid, t.b, j0, r.y, prm.C + col, true); // keys and values
        workgroupBarrier();
        let vis = min(last, r.y - 1u);
        for (var jj = 4u * t.ln; jj < min(KT, r.y - j0); jj += 4u * LANES) {
            let k0 = jj * HS4L;
            var s = vec4<f32>(0.0);
            for (var e = 0u; e < HS4L; e++) {
                s += dotsX(qv[e], k0 + e);
            }
            let j = j0 + jj;
            let visible = vec4<u32>(j, j + 1u, j + 2u, j + 3u) <= vec4<u32>(vis);
            s = select(vec4<f32>(NEG), s * prm.scale, visible);
            let mn = max(m, max(max(s.x, s.y), max(s.z, s.w)));
            let corr = exp(m - mn);
            let p = select(vec4<f32>(0.0), exp(s - vec4<f32>(mn)), visible);
            l = l * corr + ((p.x + p.y) + (p.z + p.w));
            for (var e = 0u; e < HS4L; e++) {
                acc[e] = addY(p, k0 + e, acc[e] * corr);
            }
            m = mn;
        }
    }
    // The lanes' (m, l, acc) merged into lane 0's, lane by lane: with M the larger maximum,
    // each side's l and acc scaled by exp(its m − M) and added. (A tile holds 64 rows' acc.)
    for (var k = 1u; k < LANES; k++) {
        workgroupBarrier();
        if (t.ln == k) {
            for (var e = 0u; e < HS4L; e++) {
                tileX[t.r * HS4L + e] = acc[e];
            }
            tileY[t.r] = vec4<f32>(m, l, 0.0, 0.0);
        }
        workgroupBarrier();
        if (t.ln == 0u) {
            let o = tileY[t.r];
            let mn = max(m, o.x);
            let a0 = exp(m - mn);
            let a1 = exp(o.x - mn);
            l = l * a0 + o.y * a1;
            for (var e = 0u; e < HS4L; e++) {
                acc[e] = acc[e] * a0 + tileX[t.r * HS4L + e] * a1;
            }
            m = mn;
        }
    }
    if (!t.ok || t.ln != 0u) {
        return;
    }
    let li = (t.b * prm.NH + t.h) * prm.NQ + t.i;
    if (prm.slices > 1u) { // partial results for forward_merge
        let out = t.s * prm.B * prm.NQ * prm.C + qrow;
        for (var e = 0u; e < HS4L; e++) {
            put1(out, e, acc[e]);
        }
        let R = prm.B * prm.NH * prm.NQ;
        b2[2u * t.s * R + li] = m;
        b2[(2u * t.s + 1u) * R + li] = l;
        return;
    }
    let inv = 1.0 / l;
    for (var e = 0u; e < HS4L; e++) {
        put1(qrow, e, acc[e] * inv);
    }
    if (prm.saveLSE != 0u) {
        b2[li] = m + log(l);
    }
}
// forward_merge combines a sliced forward pass's partial results, one thread per element of
// the output: with M the largest of the slices' maxima, l = Σ_s l_s·exp(m_s − M) and out =
// Σ_s acc_s·exp(m_s − M) / l, slices in order; lse = M + log(l).
@compute @workgroup_size(64)
fn forward_merge(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let idx = id.y * nwg.x * 64u + id.x;
    let n = prm.B * prm.NQ * prm.C;
    if (idx >= n) {
        return;
    }
    let row = idx / prm.C; // b·NQ + i
    let c = idx % prm.C;
    let h = c / prm.HS;
    let b = row / prm.NQ;
    let i = row % prm.NQ;
    let R = prm.B * prm.NH * prm.NQ;
    let li = (b * prm.NH + h) * prm.NQ + i;
    var M = NEG;
    for (var s = 0u; s < prm.slices; s++) {
        M = max(M, b4[2u * s * R + li]);
    }
    var l = 0.0;
    var o = 0.0;
    for (var s = 0u; s < prm.slices; s++) {
        let w = exp(b4[2u * s * R + li] - M);
        l = fma(b4[(2u * s + 1u) * R + li], w, l);
        o = fma(b3[s * n + idx], w, o);
    }
    b1[idx] = o / l;
    if (c % prm.HS == 0u && prm.saveLSE != 0u) {
        b2[li] = M + log(l);
    }
}

// The backward pass: backward_d computes D_i = dout_i·out_i for every row, then one dispatch of
// backward runs keyRows' workgroups (the longer ones) and dqRows' side by side, each pass
// alone leaving most of a large GPU idle. It serves heads wider than 32; narrower ones run
// attention_blocked.wgsl's backward instead, after the same backward_d. A key's dk and dv are
// summed by workgroups of their own, holding two and three head-wide arrays, each recomputing
// the scores: one thread holding all four (k, v, dk, dv) of a head wider than 32 is more than
// a thread's registers (255 on NVIDIA), and the spilled arrays made the pass at head size 64
// seven times as slow as the forward pass.
//
// backward_d gives each row DL threads, thread ln summing the row's columns ln, ln + DL, ...,
// so that a warp's loads read runs of consecutive memory, and adds the DL partial sums in
// order through workgroup memory. (With one thread a row, a warp's load touched 32 rows: the
// pass took 3 µs longer at large's shape on an H100; with 32 threads a row, their sums added
// by one, longer still.)
const DL: u32 = 8u;
@compute @workgroup_size(64)
fn backward_d(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let li = flat(wg, nwg) * (64u / DL) + lid / DL; // (b·NH + h)·NQ + i
    let ln = lid % DL;
    let rows = prm.B * prm.NH * prm.NQ;
    var D = 0.0;
    if (li < rows) {
        let i = li % prm.NQ;
        let h = (li / prm.NQ) % prm.NH;
        let b = li / (prm.NQ * prm.NH);
        let row = (b * prm.NQ + i) * prm.C + h * prm.HS;
        for (var c = ln; c < prm.HS; c += DL) {
            D = fma(b3[row + c], b7[row + c], D);
        }
    }
    tileX[lid / 4u][lid % 4u] = D; // (every tileX holds at least 16 vec4)
    workgroupBarrier();
    if (ln == 0u && li < rows) {
        var s = 0.0;
        for (var k = 0u; k < DL; k++) {
            let e = lid + k;
            s += tileX[e / 4u][e % 4u];
        }
        b2[li] = s;
    }
}

@compute @workgroup_size(64)
fn backward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let n = groups(prm.NQ);
    let w = flat(wg, nwg);
    if (w < n) {
        keyRows(w, lid, KEYS_DV);
    } else if (w < 2u * n) {
        dqRows(w - n, lid);
    } else if (w < 3u * n) {
        keyRows(w - 2u * n, lid, KEYS_DK);
    }
}

// dq_i = scale · Σ_{j≤i} p_ij·(dout_i·v_j − D_i)·k_j for the rows of workgroup w.
fn dqRows(w: u32, lid: u32) {
    let t = task(w, lid, prm.NQ);
    let col = t.h * prm.HS;
    let T = prm.NQ;
    let C3 = 3u * prm.C;
    let row = (t.b * T + t.i) * prm.C + col; // in out and dout
    let row3 = (t.b * T + t.i) * C3 + col;  // in qkv and dqkv
    let li = (t.b * prm.NH + t.h) * T + t.i;
    let HSm = prm.HS - 1u;
    var qv: array<vec4<f32>, HS4_MAX>;
    var dov: array<vec4<f32>, HS4_MAX>;
    var dq: array<vec4<f32>, HS4_MAX>;
    for (var e = 0u; e < HS4L; e++) {
        let c = 4u * e;
        let c1 = min(c + 1u, HSm);
        let c2 = min(c + 2u, HSm);
        let c3 = min(c + 3u, HSm);
        qv[e] = head4(b4[row3 + min(c, HSm)], b4[row3 + c1], b4[row3 + c2], b4[row3 + c3], c);
        dov[e] = head4(b3[row + min(c, HSm)], b3[row + c1], b3[row + c2], b3[row + c3], c);
        dq[e] = vec4<f32>(0.0);
    }
    let D = b2[li];
    let lse = b8[li];
    // The block's keys: 0 to its last query.
    let blk = blockOf(w, T);
    let r = span(0u, min(T, blk.x + 64u), blk.y);
    for (var j0 = r.x; j0 < r.y; j0 += KT) {
        workgroupBarrier();
        for (var e = lid; e < KT * HS4L * 4u; e += 64u) {
            let x = tileSource(e, t.b, T, j0, r.y, prm.C + col, C3);
            tileX[x.at / 4u][x.at % 4u] = select(0.0, b4[x.src], x.ok);
            tileY[x.at / 4u][x.at % 4u] = select(0.0, b4[x.src + prm.C], x.ok);
        }
        workgroupBarrier();
        let vis = min(t.i, r.y - 1u);
        for (var jj = 0u; jj < min(KT, r.y - j0); jj += 4u) {
            let k0 = jj * HS4L;
            var s = vec4<f32>(0.0);
            var dp = vec4<f32>(0.0);
            for (var e = 0u; e < HS4L; e++) {
                s += dotsX(qv[e], k0 + e);
                dp += dotsY(dov[e], k0 + e);
            }
            let j = j0 + jj;
            let visible = vec4<u32>(j, j + 1u, j + 2u, j + 3u) <= vec4<u32>(vis);
            let p = select(vec4<f32>(0.0), exp(s * prm.scale - vec4<f32>(lse)), visible);
            let ds = p * (dp - vec4<f32>(D)) * prm.scale;
            for (var e = 0u; e < HS4L; e++) {
                dq[e] = addX(ds, k0 + e, dq[e]);
            }
        }
    }
    if (!t.ok) {
        return;
    }
    let out = t.s * prm.B * T * C3 + row3;
    for (var e = 0u; e < HS4L; e++) {
        put1(out, e, dq[e]);
    }
}

// What keyRows sums: dv or dk.
const KEYS_DV: u32 = 1u;
const KEYS_DK: u32 = 2u;

// dv_j = Σ_{i≥j} p_ij·dout_i;  dk_j = scale · Σ_{i≥j} p_ij·(dout_i·v_j − D_i)·q_i for the rows
// (keys) of workgroup w: one of them (what, a constant at each call, so that the compiler
// drops the other's arrays).
fn keyRows(w: u32, lid: u32, what: u32) {
    let wantDV = what == KEYS_DV;
    let wantDK = what == KEYS_DK;
    let t = task(w, lid, prm.NQ);
    let col = t.h * prm.HS;
    let T = prm.NQ;
    let j = t.i;
    let C3 = 3u * prm.C;
    let row = (t.b * T + j) * C3 + prm.C + col; // k's, in qkv and dqkv (v's is C further)
    let HSm = prm.HS - 1u;
    var kv: array<vec4<f32>, HS4_MAX>;
    var vv: array<vec4<f32>, HS4_MAX>;
    var dk: array<vec4<f32>, HS4_MAX>;
    var dv: array<vec4<f32>, HS4_MAX>;
    for (var e = 0u; e < HS4L; e++) {
        let c = 4u * e;
        let c1 = min(c + 1u, HSm);
        let c2 = min(c + 2u, HSm);
        let c3 = min(c + 3u, HSm);
        kv[e] = head4(b4[row + min(c, HSm)], b4[row + c1], b4[row + c2], b4[row + c3], c);
        if (wantDK) {
            let vr = row + prm.C;
            vv[e] = head4(b4[vr + min(c, HSm)], b4[vr + c1], b4[vr + c2], b4[vr + c3], c);
        }
        dk[e] = vec4<f32>(0.0);
        dv[e] = vec4<f32>(0.0);
    }
    // The block's queries: its first key to the end.
    let blk = blockOf(w, T);
    let r = span(blk.x, T - blk.x, blk.y);
    let lbase = (t.b * prm.NH + t.h) * T;
    for (var i0 = r.x; i0 < r.y; i0 += KT) {
        workgroupBarrier();
        for (var e = lid; e < KT * HS4L * 4u; e += 64u) {
            let x = tileSource(e, t.b, T, i0, r.y, col, C3); // q
            let y = tileSource(e, t.b, T, i0, r.y, col, prm.C); // dout
            tileX[x.at / 4u][x.at % 4u] = select(0.0, b4[x.src], x.ok);
            tileY[y.at / 4u][y.at % 4u] = select(0.0, b3[y.src], y.ok);
        }
        workgroupBarrier();
        for (var ii = 0u; ii < min(KT, r.y - i0); ii += 4u) {
            let q0 = ii * HS4L;
            var s = vec4<f32>(0.0);
            var dp = vec4<f32>(0.0);
            for (var e = 0u; e < HS4L; e++) {
                s += dotsX(kv[e], q0 + e);
                if (wantDK) {
                    dp += dotsY(vv[e], q0 + e);
                }
            }
            let i = i0 + ii;
            let iv = vec4<u32>(i, i + 1u, i + 2u, i + 3u);
            let ic = lbase + min(iv, vec4<u32>(r.y - 1u));
            let visible = (iv >= vec4<u32>(j)) & (iv < vec4<u32>(r.y));
            let lse = vec4<f32>(b8[ic.x], b8[ic.y], b8[ic.z], b8[ic.w]);
            let p = select(vec4<f32>(0.0), exp(s * prm.scale - lse), visible);
            if (wantDV) {
                for (var e = 0u; e < HS4L; e++) {
                    dv[e] = addY(p, q0 + e, dv[e]);
                }
            }
            if (wantDK) {
                let D = vec4<f32>(b2[ic.x], b2[ic.y], b2[ic.z], b2[ic.w]);
                let ds = p * (dp - D) * prm.scale;
                for (var e = 0u; e < HS4L; e++) {
                    dk[e] = addX(ds, q0 + e, dk[e]);
                }
            }
        }
    }
    if (!t.ok) {
        return;
    }
    let out = t.s * prm.B * T * C3 + row;
    for (var e = 0u; e < HS4L; e++) {
        if (wantDK) {
            put1(out, e, dk[e]);
        }
        if (wantDV) {
            put1(out + prm.C, e, dv[e]);
        }
    }
}
