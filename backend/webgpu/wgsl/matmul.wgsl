// Matrix product C = op(A)·op(B) (+ C with accumulate) (+ bias[j] with hasBias, a linear
// layer's bias fused into the product), C [M, N], inner dimension K, in the three layouts of
// backend.Layout: NN (A [M,K], B [K,N]), NT (B [N,K]) and TN (A [K,M]).
//
// A product with few tiles of C and a long K (a weight gradient: C is a weight matrix, K the
// batch's tokens) would keep most of the GPU idle, so K can be split into slices: each
// workgroup sums one slice of one tile into a partial product, and reduce adds them up.
//
// Each workgroup of 16×16 threads computes a 64×64 tile of C. The inner dimension is walked in
// blocks of 16: the workgroup copies the 64×16 block of A and the 16×64 block of B into
// workgroup memory (zero outside the matrices, so any shape is safe), then each thread
// multiplies its 4×4 register block: rows ty + 16·r and columns tx + 16·c of the tile. Every
// element of C is summed in k order.


struct Params {
    M: u32,
    N: u32,
    K: u32,
    accumulate: u32,
    hasBias: u32,
    kSlice: u32, // split K: each workgroup sums k in [s·kSlice, (s+1)·kSlice) of its slice s
    tilesM: u32, // tile rows: workgroup row wg.y is slice wg.y / tilesM, tile row wg.y % tilesM
    split: u32,  // 1: write slice s's partial sums to c[s·M·N ...] (no accumulate, no bias)
    layout: u32, // 0 NN, 1 NT, 2 TN (a parameter, not a constant: one pipeline serves all three,
                 // which matters where compiling is slow, as on lavapipe)
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> c: array<f32>;
@group(0) @binding(2) var<storage, read_write> a: array<f32>;
@group(0) @binding(3) var<storage, read_write> b: array<f32>;
@group(0) @binding(4) var<storage, read_write> bias: array<f32>;

const TILE: u32 = 64u;
const BK: u32 = 16u;

var<workgroup> tileA: array<f32, 1024>; // [BK][TILE]: tileA[k*TILE + i] = A(row0+i, k0+k)
var<workgroup> tileB: array<f32, 1024>; // [BK][TILE]: tileB[k*TILE + j] = B(k0+k, col0+j)

// loadA returns op(A)(i, k), 0 outside the matrix or past kEnd.
fn loadA(i: u32, k: u32, kEnd: u32) -> f32 {
    if (i >= p.M || k >= kEnd) {
        return 0.0;
    }
    if (p.layout == 2u) {
        return a[k * p.M + i];
    }
    return a[i * p.K + k];
}

// loadB returns op(B)(k, j), 0 outside the matrix or past kEnd.
fn loadB(k: u32, j: u32, kEnd: u32) -> f32 {
    if (k >= kEnd || j >= p.N) {
        return 0.0;
    }
    if (p.layout == 1u) {
        return b[j * p.K + k];
    }
    return b[k * p.N + j];
}

// store writes the finished sum v of C(i, j): a partial sum of slice s when splitting K,
// otherwise with accumulate and bias.
fn store(i: u32, j: u32, s: u32, v: f32) {
    if (p.split != 0u) {
        c[(s * p.M + i) * p.N + j] = v;
        return;
    }
    var x = v;
    if (p.accumulate != 0u) {
        x += c[i * p.N + j];
    }
    if (p.hasBias != 0u) {
        x += bias[j];
    }
    c[i * p.N + j] = x;
}

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let slice = wg.y / p.tilesM;
    let row0 = (wg.y % p.tilesM) * TILE;
    let col0 = wg.x * TILE;
    let tid = lid.y * 16u + lid.x;
    var acc: array<f32, 16>;
    for (var i = 0u; i < 16u; i++) {
        acc[i] = 0.0;
    }
    let kEnd = min(p.K, (slice + 1u) * p.kSlice);
    for (var k0 = slice * p.kSlice; k0 < kEnd; k0 += BK) {
        // 1024 elements of each block, 4 per thread. Consecutive threads read consecutive
        // addresses of the operand's memory layout.
        for (var e = 0u; e < 4u; e++) {
            let idx = tid + e * 256u;
            var i: u32;
            var k: u32;
            if (p.layout == 2u) { // A is [K, M]: consecutive i
                i = idx % TILE;
                k = idx / TILE;
            } else { // A is [M, K]: consecutive k
                k = idx % BK;
                i = idx / BK;
            }
            tileA[k * TILE + i] = loadA(row0 + i, k0 + k, kEnd);
            var j: u32;
            var kb: u32;
            if (p.layout == 1u) { // B is [N, K]: consecutive k
                kb = idx % BK;
                j = idx / BK;
            } else { // B is [K, N]: consecutive j
                j = idx % TILE;
                kb = idx / TILE;
            }
            tileB[kb * TILE + j] = loadB(k0 + kb, col0 + j, kEnd);
        }
        workgroupBarrier();
        for (var k = 0u; k < BK; k++) {
            var av: array<f32, 4>;
            var bv: array<f32, 4>;
            for (var r = 0u; r < 4u; r++) {
                av[r] = tileA[k * TILE + lid.y + 16u * r];
                bv[r] = tileB[k * TILE + lid.x + 16u * r];
            }
            for (var r = 0u; r < 4u; r++) {
                for (var q = 0u; q < 4u; q++) {
                    acc[r * 4u + q] = fma(av[r], bv[q], acc[r * 4u + q]);
                }
            }
        }
        workgroupBarrier();
    }
    for (var r = 0u; r < 4u; r++) {
        let i = row0 + lid.y + 16u * r;
        if (i >= p.M) {
            continue;
        }
        for (var q = 0u; q < 4u; q++) {
            let j = col0 + lid.x + 16u * q;
            if (j < p.N) {
                store(i, j, slice, acc[r * 4u + q]);
            }
        }
    }
}

// reduce finishes a product whose K was split: C(i, j) = Σ_s partial_s(i, j) (+ C with
// accumulate) (+ bias[j]), slices summed in order. The partial sums are in the binding of a
// (kSlice holds the number of slices here).
@compute @workgroup_size(256)
fn reduce(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let MN = p.M * p.N;
    for (var e = id.y * nwg.x * 256u + id.x; e < MN; e += nwg.x * nwg.y * 256u) {
        var v = 0.0;
        for (var s = 0u; s < p.kSlice; s++) {
            v += a[s * MN + e];
        }
        if (p.accumulate != 0u) {
            v += c[e];
        }
        if (p.hasBias != 0u) {
            v += bias[e % p.N];
        }
        c[e] = v;
    }
}
