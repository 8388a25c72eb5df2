// The parameters, bindings and a helper of the attention kernels (attention.wgsl and
// attention_blocked.wgsl, which both include this file).

struct Params {
    B: u32,
    NQ: u32,    // queries per sequence
    TK: u32,    // key rows per sequence
    C: u32,
    NH: u32,
    HS: u32,
    P0: u32,    // position of query 0 (0 in training, pos when decoding): query i is row P0 + i
                // of its sequence's rows of qkv
    scale: f32, // 1/sqrt(HS)
    saveLSE: u32,
    slices: u32, // each row's partner rows in this many slices, each summed into partial
                 // results by threads of its own (slice s's at element offset s·B·NQ·3C of
                 // dqkv's, or s·B·NQ·C of the forward's unnormalised output, whose m and l go
                 // to lse's binding)
}

@group(0) @binding(0) var<uniform> prm: Params;
// forward:        out, lse, qkv (sliced: out and (m, l) partials for forward_merge)
// forward_merge:  out, lse, out partials, (m, l) partials
// backward_d:     -, D, dout, -, -, -, out, -
// backward:       dqkv, D, dout, qkv, -, -, -, lse (attention_blocked.wgsl's too)
@group(0) @binding(1) var<storage, read_write> b1: array<f32>;
@group(0) @binding(2) var<storage, read_write> b2: array<f32>;
@group(0) @binding(3) var<storage, read_write> b3: array<f32>;
@group(0) @binding(4) var<storage, read_write> b4: array<f32>;
@group(0) @binding(5) var<storage, read_write> b5: array<f32>;
@group(0) @binding(6) var<storage, read_write> b6: array<f32>;
@group(0) @binding(7) var<storage, read_write> b7: array<f32>;
@group(0) @binding(8) var<storage, read_write> b8: array<f32>;

// put1 stores vec4 e of a head, v, at elements at + 4e.. of b1, those before HS. (The
// kernels' per-thread arrays are indexed only by loops over a head's vec4, which unroll for
// the sizes compiled per size: an index computed at run time, such as c / 4 in a loop over
// HS, would put the whole array in memory.)
fn put1(at: u32, e: u32, v: vec4<f32>) {
    let c = 4u * e;
    b1[at + c] = v.x;
    if (c + 1u < prm.HS) { b1[at + c + 1u] = v.y; }
    if (c + 2u < prm.HS) { b1[at + c + 2u] = v.z; }
    if (c + 3u < prm.HS) { b1[at + c + 3u] = v.w; }
}
