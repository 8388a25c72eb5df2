// Finishes products whose K was split (matmul.wgsl), several in one dispatch. A split product
// leaves the partial sums of its slices; rather than a dispatch of matmul.wgsl's reduce right
// after it, its reduce is held back (matmul.go, placePartials and holdReduces) until
// something reads or writes what it would write, and the reduces held by then run here
// together. In a layer's backward pass that is two dispatches instead of four. The arithmetic
// is reduce's: C(i, j) = Σ_s partial_s(i, j), slices in order, + C with accumulate; a bias
// gradient's row (the partial sums' row M) is added to its bias. (Products with a bias or an
// epilogue are not held.)
//
// Where things are: the C (and bias) of every product lies in one of two buffers, d0 and d1,
// bound whole; every product's partial sums lie in part, also bound whole; the parameters give
// element offsets into them. Each thread sums elements of the products' C in turn, the
// products' elements numbered one after the other.

struct Params {
    w: array<vec4<u32>, 8>, // word 0: the number of products; then ENTRY words a product (word)
}

@group(0) @binding(0) var<uniform> prm: Params;
@group(0) @binding(1) var<storage, read_write> d0: array<f32>;
@group(0) @binding(2) var<storage, read_write> d1: array<f32>;
@group(0) @binding(3) var<storage, read_write> part: array<f32>;

// A product's words, from 1 + ENTRY·k: C's offset, its bias's offset, its partial sums'
// offset, M, N, and the number of slices | flags << 16.
const ENTRY: u32 = 6u;
const IN_D1: u32 = 1u;    // C lies in d1 (else d0)
const BIAS_D1: u32 = 2u;  // the bias lies in d1
const ACCUMULATE: u32 = 4u;
const BIAS_ROW: u32 = 8u; // the partial sums have a row M, the bias gradient's

fn word(i: u32) -> u32 {
    return prm.w[i / 4u][i % 4u];
}

// elems is the number of elements of one slice of product k (its bias row included).
fn elems(k: u32) -> u32 {
    let b = 1u + ENTRY * k;
    return (word(b + 3u) + select(0u, 1u, ((word(b + 5u) >> 16u) & BIAS_ROW) != 0u)) * word(b + 4u);
}

@compute @workgroup_size(256)
fn multi(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let count = word(0u);
    var total = 0u;
    for (var k = 0u; k < count; k++) {
        total += elems(k);
    }
    for (var e = id.y * nwg.x * 256u + id.x; e < total; e += nwg.x * nwg.y * 256u) {
        var k = 0u;
        var start = 0u;
        loop {
            let n = elems(k);
            if (e < start + n || k + 1u == count) {
                break;
            }
            start += n;
            k++;
        }
        let b = 1u + ENTRY * k;
        let n = elems(k);
        let i = e - start;
        let slices = word(b + 5u) & 0xffffu;
        let flags = word(b + 5u) >> 16u;
        let p0 = word(b + 2u) + i;
        var v = 0.0;
        for (var s = 0u; s < slices; s++) {
            v += part[p0 + s * n];
        }
        let MN = word(b + 3u) * word(b + 4u);
        if (i >= MN) {
            let o = word(b + 1u) + i - MN;
            if ((flags & BIAS_D1) != 0u) {
                d1[o] += v;
            } else {
                d0[o] += v;
            }
            continue;
        }
        let o = word(b) + i;
        if ((flags & IN_D1) != 0u) {
            if ((flags & ACCUMULATE) != 0u) {
                v += d1[o];
            }
            d1[o] = v;
        } else {
            if ((flags & ACCUMULATE) != 0u) {
                v += d0[o];
            }
            d0[o] = v;
        }
    }
}
