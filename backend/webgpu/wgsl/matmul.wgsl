// Matrix product C = op(A)·op(B) (+ C with accumulate) (+ bias[j] with hasBias, a linear
// layer's bias fused into the product) (then a GELU, or a product with another matrix: the
// epilogue), C [M, N], inner dimension K, in the three layouts of backend.Layout: NN (A [M,K],
// B [K,N]), NT (B [N,K]) and TN (A [K,M]).
//
// A product with few tiles of C and a long K (a weight gradient: C is a weight matrix, K the
// batch's tokens) would keep most of the GPU idle, so K can be split into slices: each
// workgroup sums one slice of one tile into a partial product, and reduce adds them up.
//
// main64 computes a 64×64 tile of C per workgroup of 16×16 threads, each thread a 4×4 register
// block (one pipeline: the layout is a parameter). It walks the inner dimension in blocks of 16:
// the workgroup copies a block of A and of B into workgroup memory (zero outside the matrices,
// so any shape is safe; the next block is read from memory into registers while the current
// one is multiplied), then each thread reads vec4 of A and of B from the tiles and updates its
// register block with vec4 multiply-adds. Thread (tx, ty) holds rows 4·ty + r and columns 4·tx
// + q of the tile. Every element of C is summed in k order. The register blocks are named vec4
// variables: an array indexed in loops (the first 8×8 kernel) was spilled to memory by
// NVIDIA's driver and ran at 2 TFLOP/s on an H100. (A second kernel of 128×128 tiles, 8×8
// blocks per thread, was slower on an H200 at every shape once the copies of inner blocks
// skipped their bounds checks: 27.8 against 30.8 TFLOP/s at 4096³.)
//
// dual64 runs two independent products in one dispatch, each workgroup a tile of one of them:
// a linear layer's input gradient (C = dY·Wᵀ) and weight gradient (C2 = Xᵀ·dY), whose second
// operand is the first one's first (dY). Products that size keep most of a large GPU idle, so
// the two run side by side instead of one after the other; reduce2 finishes both where they
// were split. The functions between "PROBLEM BEGIN" and "PROBLEM END" are written for the
// first product (prm.p1; C, A, B in c, a, b); the Go side appends a copy of them for the
// second, each name with "_2" added, reading prm.p2 and c2, a2, a (webgpu.go, problem2).
// (Helpers that took the problem as a parameter instead made every product a quarter slower
// on an H200.)

// Prob is one product's parameters.
struct Prob {
    M: u32,
    N: u32,
    K: u32,
    accumulate: u32,
    hasBias: u32,
    kSlice: u32, // split K: each workgroup sums k in [s·kSlice, (s+1)·kSlice) of its slice s
                 // (reduce: the number of slices)
    tilesM: u32, // tile rows: workgroup row y is slice y / tilesM, tile row y % tilesM
    split: u32,  // 1: write slice s's partial sums to c[s·M·N ...] (no accumulate, no bias)
    opLayout: u32, // 0 NN, 1 NT, 2 TN (a parameter, not a constant: one pipeline serves all
                   // three, which matters where compiling is slow, as on lavapipe)
    biasGrad: u32, // 1: op(A) has a row M of ones, whose product row 1ᵀ·op(B) is added to
                   // bias (a linear layer's bias gradient, fused into its weight gradient)
    epilogue: u32, // what becomes of each finished x (after accumulate and bias): 0 C = x;
                   // 1 C = GELU'(x) and E = GELU(x); 2 C = GELU(x); 3 C = x·E (see finish)
    tilesN: u32, // tile columns (dual64, reduce2)
}

struct Params {
    p1: Prob,
    p2: Prob,     // dual64 and reduce2: the second product
    count1: u32,  // dual64: workgroups of the first product
    count2: u32,  // dual64: workgroups of the second
}

@group(0) @binding(0) var<uniform> prm: Params;
@group(0) @binding(1) var<storage, read_write> c: array<f32>;
@group(0) @binding(2) var<storage, read_write> a: array<f32>;
@group(0) @binding(3) var<storage, read_write> b: array<f32>;
@group(0) @binding(4) var<storage, read_write> bias: array<f32>;
@group(0) @binding(5) var<storage, read_write> ep: array<f32>; // E, [M, N], for epilogues 1 and 3
// dual64 and reduce2: the second product's C and A (its B is the first one's A).
@group(0) @binding(6) var<storage, read_write> c2: array<f32>;
@group(0) @binding(7) var<storage, read_write> a2: array<f32>;

// tileIndex returns where element e (0..1023) of the copy of a tile×bk block goes: (row or
// column of the tile, k within the block), consecutive e following the operand's memory
// layout (consecutive k if kFast, else consecutive rows or columns).
fn tileIndex(e: u32, kFast: bool, tile: u32, bk: u32) -> vec2<u32> {
    if (kFast) {
        return vec2<u32>(e / bk, e % bk);
    }
    return vec2<u32>(e % tile, e / tile);
}

// Every tile element a thread reads has been put there first (workgroup memory is not zeroed
// on Vulkan: internal/gpu/zeroinit.go).
// The workgroup's tiles of A and B: k row k of a tile holds `row` vec4 (the tile's width / 4,
// plus one of padding, so that copies along k hit distinct memory banks), element i of the row
// at [k·row + i/4][i%4].
var<workgroup> tileA: array<vec4<f32>, 272>; // [BK64][ROW64]
var<workgroup> tileB: array<vec4<f32>, 272>;

// put stores v, elements tid + 256·e (e < 4) of a tile×bk block as fetchA or fetchB read them,
// in tileA (isA) or tileB, whose k rows hold row vec4.
fn put(tid: u32, kFast: bool, v: vec4<f32>, isA: bool, tile: u32, bk: u32, row: u32) {
    let i0 = tileIndex(tid, kFast, tile, bk);
    let i1 = tileIndex(tid + 256u, kFast, tile, bk);
    let i2 = tileIndex(tid + 512u, kFast, tile, bk);
    let i3 = tileIndex(tid + 768u, kFast, tile, bk);
    if (isA) {
        tileA[i0.y * row + i0.x / 4u][i0.x % 4u] = v.x;
        tileA[i1.y * row + i1.x / 4u][i1.x % 4u] = v.y;
        tileA[i2.y * row + i2.x / 4u][i2.x % 4u] = v.z;
        tileA[i3.y * row + i3.x / 4u][i3.x % 4u] = v.w;
    } else {
        tileB[i0.y * row + i0.x / 4u][i0.x % 4u] = v.x;
        tileB[i1.y * row + i1.x / 4u][i1.x % 4u] = v.y;
        tileB[i2.y * row + i2.x / 4u][i2.x % 4u] = v.z;
        tileB[i3.y * row + i3.x / 4u][i3.x % 4u] = v.w;
    }
}

// main64: 64×64 tiles, blocks of 16 along k; per step of k a thread reads one vec4 of A and one
// of B for 16 multiply-adds.
const TILE64: u32 = 64u;
const BK64: u32 = 16u;
const ROW64: u32 = 17u; // vec4 per k row of a tile: 16 and one of padding

// PROBLEM BEGIN

// loadA returns op(A)(i, k), 0 outside the matrix or past kEnd (1 in the row of ones).
fn loadA(i: u32, k: u32, kEnd: u32) -> f32 {
    if (k >= kEnd) {
        return 0.0;
    }
    if (i >= prm.p1.M) {
        return select(0.0, 1.0, i == prm.p1.M && prm.p1.biasGrad != 0u);
    }
    if (prm.p1.opLayout == 2u) {
        return a[k * prm.p1.M + i];
    }
    return a[i * prm.p1.K + k];
}

// loadB returns op(B)(k, j), 0 outside the matrix or past kEnd.
fn loadB(k: u32, j: u32, kEnd: u32) -> f32 {
    if (k >= kEnd || j >= prm.p1.N) {
        return 0.0;
    }
    if (prm.p1.opLayout == 1u) {
        return b[j * prm.p1.K + k];
    }
    return b[k * prm.p1.N + j];
}

// store writes the finished sum v of C(i, j): a partial sum of slice s when splitting K
// (slices of M + biasGrad rows), otherwise with accumulate and bias; row M (biasGrad) is added
// to bias.
fn store(i: u32, j: u32, s: u32, v: f32) {
    if (prm.p1.split != 0u) {
        c[(s * (prm.p1.M + prm.p1.biasGrad) + i) * prm.p1.N + j] = v;
        return;
    }
    if (i == prm.p1.M) {
        bias[j] += v;
        return;
    }
    finish(i * prm.p1.N + j, j, v);
}

// finish writes element e (column j) of C given its product v: plus C with accumulate, plus
// bias[j] with hasBias, then the epilogue: a linear layer's GELU (keeping GELU' in C for the
// backward pass, GELU itself in E) or the product with E (the gradient through a GELU, as
// elementwise.wgsl's mul does).
fn finish(e: u32, j: u32, v: f32) {
    var x = v;
    if (prm.p1.accumulate != 0u) {
        x += c[e];
    }
    if (prm.p1.hasBias != 0u) {
        x += bias[j];
    }
    switch prm.p1.epilogue {
        case 1u: {
            let cdf = normalCDF(x);
            ep[e] = x * cdf;
            c[e] = geluGrad(x, cdf);
        }
        case 2u: {
            c[e] = x * normalCDF(x);
        }
        case 3u: {
            c[e] = x * ep[e];
        }
        default: {
            c[e] = x;
        }
    }
}

// finish4 is finish for elements e..e+3 (columns j..j+3 of one row, all inside C; not split):
// the same arithmetic for each.
fn finish4(e: u32, j: u32, v: vec4<f32>) {
    var x = v;
    if (prm.p1.accumulate != 0u) {
        x += vec4<f32>(c[e], c[e + 1u], c[e + 2u], c[e + 3u]);
    }
    if (prm.p1.hasBias != 0u) {
        x += vec4<f32>(bias[j], bias[j + 1u], bias[j + 2u], bias[j + 3u]);
    }
    var y = x;
    switch prm.p1.epilogue {
        case 1u: {
            let cdf = vec4<f32>(normalCDF(x.x), normalCDF(x.y), normalCDF(x.z), normalCDF(x.w));
            let g = x * cdf;
            ep[e] = g.x;
            ep[e + 1u] = g.y;
            ep[e + 2u] = g.z;
            ep[e + 3u] = g.w;
            y = vec4<f32>(geluGrad(x.x, cdf.x), geluGrad(x.y, cdf.y), geluGrad(x.z, cdf.z), geluGrad(x.w, cdf.w));
        }
        case 2u: {
            y = x * vec4<f32>(normalCDF(x.x), normalCDF(x.y), normalCDF(x.z), normalCDF(x.w));
        }
        case 3u: {
            y = x * vec4<f32>(ep[e], ep[e + 1u], ep[e + 2u], ep[e + 3u]);
        }
        default: {
        }
    }
    c[e] = y.x;
    c[e + 1u] = y.y;
    c[e + 2u] = y.z;
    c[e + 3u] = y.w;
}

// fetchA returns elements tid + 256·e (e < 4) of the tile×bk block of A at rows row0 and
// inner index k0, fetchB those of the bk×tile block of B at columns col0; put stores them in
// the workgroup's tiles. A block wholly inside its matrix (every block but those on the
// matrix's edges) is read without the checks of loadA and loadB: on an H200 that made the
// products at huge's shapes 10-20% faster. Its four elements lie a fixed stride apart in
// memory (256 / bk rows of the operand, or 256 / tile k rows), so the first one's offset is
// computed and the others' are one addition each: with every offset computed from its
// (row, k), each copied element cost ~10 instructions a block, and steps took 1-4.5% longer
// (H200, 2026-11-27). The edge path's indices i0..i3 are computed before the test, not inside
// the edge path: moved there, the driver compiled dual64 otherwise and large's step was 4%
// slower (same SPIR-V semantics, measured twice).
fn fetchA(tid: u32, row0: u32, k0: u32, kEnd: u32, kFast: bool, tile: u32, bk: u32) -> vec4<f32> {
    let i0 = tileIndex(tid, kFast, tile, bk);
    let i1 = tileIndex(tid + 256u, kFast, tile, bk);
    let i2 = tileIndex(tid + 512u, kFast, tile, bk);
    let i3 = tileIndex(tid + 768u, kFast, tile, bk);
    if (row0 + tile <= prm.p1.M && k0 + bk <= kEnd) { // the whole block inside A
        if (prm.p1.opLayout == 2u) {
            let M = prm.p1.M;
            let e = (k0 + tid / tile) * M + row0 + tid % tile;
            let s = (256u / tile) * M;
            return vec4<f32>(a[e], a[e + s], a[e + 2u * s], a[e + 3u * s]);
        }
        let K = prm.p1.K;
        let e = (row0 + tid / bk) * K + k0 + tid % bk;
        let s = (256u / bk) * K;
        return vec4<f32>(a[e], a[e + s], a[e + 2u * s], a[e + 3u * s]);
    }
    return vec4<f32>(loadA(row0 + i0.x, k0 + i0.y, kEnd), loadA(row0 + i1.x, k0 + i1.y, kEnd),
        loadA(row0 + i2.x, k0 + i2.y, kEnd), loadA(row0 + i3.x, k0 + i3.y, kEnd));
}

fn fetchB(tid: u32, col0: u32, k0: u32, kEnd: u32, kFast: bool, tile: u32, bk: u32) -> vec4<f32> {
    let i0 = tileIndex(tid, kFast, tile, bk);
    let i1 = tileIndex(tid + 256u, kFast, tile, bk);
    let i2 = tileIndex(tid + 512u, kFast, tile, bk);
    let i3 = tileIndex(tid + 768u, kFast, tile, bk);
    if (col0 + tile <= prm.p1.N && k0 + bk <= kEnd) { // the whole block inside B
        if (prm.p1.opLayout == 1u) {
            let K = prm.p1.K;
            let e = (col0 + tid / bk) * K + k0 + tid % bk;
            let s = (256u / bk) * K;
            return vec4<f32>(b[e], b[e + s], b[e + 2u * s], b[e + 3u * s]);
        }
        let N = prm.p1.N;
        let e = (k0 + tid / tile) * N + col0 + tid % tile;
        let s = (256u / tile) * N;
        return vec4<f32>(b[e], b[e + s], b[e + 2u * s], b[e + 3u * s]);
    }
    return vec4<f32>(loadB(k0 + i0.y, col0 + i0.x, kEnd), loadB(k0 + i1.y, col0 + i1.x, kEnd),
        loadB(k0 + i2.y, col0 + i2.x, kEnd), loadB(k0 + i3.y, col0 + i3.x, kEnd));
}

// store4 stores C(i, j + q) = v[q] for the q < 4 inside the matrix (and its row of ones).
// Four columns of a row of C (not the row of ones) go through one call of finish4: the
// product's settings are looked at once for the four, not once for each; the last, partial
// group of a row goes element by element. (Element by element, a tile's stores took 2.4 µs on
// an H200, a fifth of a small product; four at a time, 0.8-0.9 µs: python/kernel_clock.py.)
fn store4(i: u32, j: u32, s: u32, v: vec4<f32>) {
    if (i >= prm.p1.M + prm.p1.biasGrad) {
        return;
    }
    if (i < prm.p1.M && j + 4u <= prm.p1.N) {
        if (prm.p1.split != 0u) {
            let e = (s * (prm.p1.M + prm.p1.biasGrad) + i) * prm.p1.N + j;
            c[e] = v.x;
            c[e + 1u] = v.y;
            c[e + 2u] = v.z;
            c[e + 3u] = v.w;
            return;
        }
        finish4(i * prm.p1.N + j, j, v);
        return;
    }
    for (var q = 0u; q < 4u; q++) {
        if (j + q < prm.p1.N) {
            store(i, j + q, s, v[q]);
        }
    }
}

// tile64 computes the tile at tile column x and tile row y (slice y / tilesM).
fn tile64(x: u32, y: u32, lid: vec3<u32>) {
    let slice = y / prm.p1.tilesM;
    let row0 = (y % prm.p1.tilesM) * TILE64;
    let col0 = x * TILE64;
    let tid = lid.y * 16u + lid.x;
    let aFast = prm.p1.opLayout != 2u;
    let bFast = prm.p1.opLayout == 1u;
    let kEnd = min(prm.p1.K, (slice + 1u) * prm.p1.kSlice);
    var k0 = slice * prm.p1.kSlice;
    if (row0 == prm.p1.M) { // a tile row of its own for the row of ones (biasGrad)
        biasRow64(col0, slice, k0, kEnd, lid);
        return;
    }
    var c0 = vec4<f32>(0.0); var c1 = vec4<f32>(0.0); var c2v = vec4<f32>(0.0); var c3 = vec4<f32>(0.0);
    var pa = fetchA(tid, row0, k0, kEnd, aFast, TILE64, BK64);
    var pb = fetchB(tid, col0, k0, kEnd, bFast, TILE64, BK64);
    for (; k0 < kEnd; k0 += BK64) {
        put(tid, aFast, pa, true, TILE64, BK64, ROW64);
        put(tid, bFast, pb, false, TILE64, BK64, ROW64);
        workgroupBarrier();
        let k1 = k0 + BK64;
        if (k1 < kEnd) {
            pa = fetchA(tid, row0, k1, kEnd, aFast, TILE64, BK64);
            pb = fetchB(tid, col0, k1, kEnd, bFast, TILE64, BK64);
        }
        for (var k = 0u; k < BK64; k++) {
            let av = tileA[k * ROW64 + lid.y];
            let bv = tileB[k * ROW64 + lid.x];
            c0 = fma(vec4<f32>(av.x), bv, c0);
            c1 = fma(vec4<f32>(av.y), bv, c1);
            c2v = fma(vec4<f32>(av.z), bv, c2v);
            c3 = fma(vec4<f32>(av.w), bv, c3);
        }
        workgroupBarrier();
    }
    let i0 = row0 + 4u * lid.y;
    let j0 = col0 + 4u * lid.x;
    store4(i0, j0, slice, c0);
    store4(i0 + 1u, j0, slice, c1);
    store4(i0 + 2u, j0, slice, c2v);
    store4(i0 + 3u, j0, slice, c3);
}

// biasRow64 computes the tile at columns col0.. of the tile row that holds only the row of ones
// (with biasGrad, when M is a multiple of 64): its row M is the column sums 1ᵀ·op(B) over the
// slice's k, and its other rows lie outside C. Only the sums are computed: each of the 16
// thread rows adds every 16th k, then thread row 0 adds the 16 partial sums in order.
fn biasRow64(col0: u32, slice: u32, k0: u32, kEnd: u32, lid: vec3<u32>) {
    let j = col0 + 4u * lid.x;
    var s = vec4<f32>(0.0);
    for (var k = k0 + lid.y; k < kEnd; k += 16u) {
        s += vec4<f32>(loadB(k, j, kEnd), loadB(k, j + 1u, kEnd), loadB(k, j + 2u, kEnd), loadB(k, j + 3u, kEnd));
    }
    tileA[lid.y * 16u + lid.x] = s;
    workgroupBarrier();
    if (lid.y == 0u) {
        var t = vec4<f32>(0.0);
        for (var r = 0u; r < 16u; r++) {
            t += tileA[r * 16u + lid.x];
        }
        store4(prm.p1.M, j, slice, t);
    }
}

// reduceOne finishes element e of one slice of a product whose K was split (see reduce).
fn reduceOne(e: u32) {
    let MN = prm.p1.M * prm.p1.N;
    let n = MN + prm.p1.biasGrad * prm.p1.N;
    var v = 0.0;
    for (var s = 0u; s < prm.p1.kSlice; s++) {
        v += a[s * n + e];
    }
    if (e >= MN) {
        bias[e - MN] += v;
        return;
    }
    finish(e, e % prm.p1.N, v);
}

// PROBLEM END

@compute @workgroup_size(16, 16)
fn main64(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    tile64(wg.x, wg.y, lid);
}

// gemv computes a product of a single row (M = 1: a decoded token's linear layers and its
// logits; op(A)'s row is a[0..K) in every layout), unsplit and without a row of ones, GEMV
// columns per workgroup of 256 threads, GEMVK per column: lane y of column x sums the
// k ≡ y (mod GEMVK) in k order, then lane 0 adds the GEMVK sums in order and finishes the
// column as main64 does (accumulate, bias, epilogue). Consecutive threads read consecutive
// memory: with B [K, N] (NN, TN) they are consecutive columns, with Bᵀ [N, K] (NT) consecutive
// k. (main64 would compute a 64×64 tile for its one row, and split a long K into slices that a
// second dispatch adds up.) The sums go through tileA, element y·GEMV + x of it as f32: with
// a workgroup variable of their own in this file, training steps (main64, dual64) ran 2–6%
// slower on an H100.
const GEMV: u32 = 8u;
const GEMVK: u32 = 32u;

@compute @workgroup_size(256)
fn gemv(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let trans = prm.p1.opLayout == 1u;
    let x = select(t % GEMV, t / GEMVK, trans);
    let y = select(t / GEMV, t % GEMVK, trans);
    let j = (wg.y * nwg.x + wg.x) * GEMV + x;
    let N = prm.p1.N;
    let K = prm.p1.K;
    var s = 0.0;
    if (j < N) {
        if (trans) {
            for (var k = y; k < K; k += GEMVK) {
                s = fma(a[k], b[j * K + k], s);
            }
        } else {
            for (var k = y; k < K; k += GEMVK) {
                s = fma(a[k], b[k * N + j], s);
            }
        }
    }
    let e = y * GEMV + x;
    tileA[e / 4u][e % 4u] = s;
    workgroupBarrier();
    if (y == 0u && j < N) {
        var v = tileA[x / 4u][x % 4u];
        for (var r = 1u; r < GEMVK; r++) {
            let f = r * GEMV + x;
            v += tileA[f / 4u][f % 4u];
        }
        finish(j, j, v);
    }
}

// dual64: workgroups [0, count1) are tiles of the first product (tile column first), the next
// count2 of the second (in biasLast's order), in a grid of any shape.
@compute @workgroup_size(16, 16)
fn dual64(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let w = wg.y * nwg.x + wg.x;
    if (w < prm.count1) {
        tile64(w % prm.p1.tilesN, w / prm.p1.tilesN, lid);
    } else if (w - prm.count1 < prm.count2) {
        let t = biasLast(w - prm.count1, prm.count2, prm.p2.tilesN, prm.p2.tilesM, prm.p2.biasGrad != 0u && prm.p2.M % TILE64 == 0u);
        tile64_2(t.x, t.y, lid);
    }
}

// biasLast maps position w of a product's count workgroups (its tiles, tilesN × tilesM, in
// each of its slices of K) to the tile column x and row y that tile64 takes, row by row and
// slice after slice as the grid, but where the row of ones is a tile row of its own (own:
// biasGrad with M a multiple of 64) its tiles come after every other. The GPU places a
// dispatch's workgroups in grid order, about one per SM at a time, and an SM's share of the
// work is the sum of its workgroups' blocks along K; a bias row's tile is cheap (one row of
// sums), so interleaved every tilesM tiles it left some SMs with an extra real tile where
// others had a cheap one. Last, it fills the end. (H100, three rounds: medium 1.07–1.08 →
// 1.06–1.07 ms, large 2.19–2.20 → 2.18, xl 2.94–2.95 → 2.93, huge 7.24–7.26 → 7.17–7.18;
// docs/performance.md, 2026-11-27.) Where a dispatch has more workgroups than the GPU holds
// at once (large's MLP-output pair), the bias-row tiles start last, and as their threads walk
// K one row of loads after another, that pair took 45–47 → 47–53 µs; bias rows first made xl
// 2% slower, and choosing by the workgroup count made every preset slower (xl 3%). Only
// dual64's second product uses it: the weight gradients, the products with a row of ones, all
// run there.
fn biasLast(w: u32, count: u32, tilesN: u32, tilesM: u32, own: bool) -> vec2<u32> {
    if (!own) {
        return vec2<u32>(w % tilesN, w / tilesN);
    }
    let slices = count / (tilesN * tilesM);
    let real = (tilesM - 1u) * tilesN; // a slice's tiles of C
    if (w < slices * real) {
        let r = w % real;
        return vec2<u32>(r % tilesN, w / real * tilesM + r / tilesN);
    }
    let b = w - slices * real;
    return vec2<u32>(b % tilesN, b / tilesN * tilesM + tilesM - 1u);
}

// reduce finishes a product whose K was split: C(i, j) = Σ_s partial_s(i, j) (+ C with
// accumulate) (+ bias[j]) (and the epilogue), slices summed in order; with biasGrad, the
// partial sums' row M is added to bias. The partial sums are in the binding of a (kSlice holds
// the number of slices here). reduce2 does the same for the two products of dual64, those of
// the second in a2 (a product that was not split has kSlice 0 and nothing to do).
@compute @workgroup_size(256)
fn reduce(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = (prm.p1.M + prm.p1.biasGrad) * prm.p1.N; // elements of one slice
    for (var e = id.y * nwg.x * 256u + id.x; e < n; e += nwg.x * nwg.y * 256u) {
        reduceOne(e);
    }
}

@compute @workgroup_size(256)
fn reduce2(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let n1 = select(0u, (prm.p1.M + prm.p1.biasGrad) * prm.p1.N, prm.p1.kSlice > 0u);
    let n2 = select(0u, (prm.p2.M + prm.p2.biasGrad) * prm.p2.N, prm.p2.kSlice > 0u);
    for (var e = id.y * nwg.x * 256u + id.x; e < n1 + n2; e += nwg.x * nwg.y * 256u) {
        if (e < n1) {
            reduceOne(e);
        } else {
            reduceOne_2(e - n1);
        }
    }
}
