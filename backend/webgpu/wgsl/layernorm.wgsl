// LayerNorm over rows of width C (eps 1e-5, biased variance): 64 threads per row with tree
// reductions in workgroup memory. Its backward pass is in layernorm_backward.wgsl, which
// includes this file (its parameters, bindings and helpers). The two are files of their own
// because the forward kernels ran slower beside the backward pass's code: with its 4 KB of
// workgroup variables in the module beside their own 0.5 KB, forward_add ran 14.2 µs instead
// of 12.2 at large's shape on an H100 (likely NVIDIA's driver gives a kernel the memory of
// every workgroup variable in its module; docs/performance.md, thirty-eighth session).

struct Params {
    N: u32,
    C: u32,
    // forward_slices: the slices of the branch's partial sums, and where the gains, shifts and
    // the branch's bias start in the binding of g (one window of the parameters, see
    // forward_slices; 0 in the other entry points, which read gains from g and shifts from bd).
    slices: u32,
    packed: u32,
    gOff: u32,
    bOff: u32,
    biasOff: u32,
}

@group(0) @binding(0) var<uniform> prm: Params;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;  // out | din | db
@group(0) @binding(2) var<storage, read_write> mean: array<f32>;
@group(0) @binding(3) var<storage, read_write> rstd: array<f32>;
@group(0) @binding(4) var<storage, read_write> inp: array<f32>;
@group(0) @binding(5) var<storage, read_write> g: array<f32>;   // g | g | - | window
@group(0) @binding(6) var<storage, read_write> bd: array<f32>;  // b | dout | dout | -
// (forward and forward_add | backward | bias_backward | forward_slices, whose window holds the
// gains, shifts and a bias; backward, forward_add and forward_slices also bind 7 and 8)

const WG: u32 = 64u;
// The workgroup arrays below are written in full before they are read (workgroup memory is
// not zeroed on Vulkan: internal/gpu/zeroinit.go).
var<workgroup> red: array<f32, 128>;

// sum2 reduces a and b over the workgroup; every thread gets the totals.
fn sum2(lid: u32, a: f32, b: f32) -> vec2<f32> {
    red[lid] = a;
    red[WG + lid] = b;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            red[lid] += red[lid + s];
            red[WG + lid] += red[WG + lid + s];
        }
        workgroupBarrier();
    }
    let r = vec2<f32>(red[0], red[WG]);
    workgroupBarrier();
    return r;
}

fn rowIndex(wg: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wg.y * nwg.x + wg.x;
}

@compute @workgroup_size(64)
fn forward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let r = rowIndex(wg, nwg);
    if (r >= prm.N) {
        return; // uniform across the workgroup
    }
    normRow(r, lid);
}

// normRow is the layer norm of row r of inp, by the 64 threads of a workgroup.
fn normRow(r: u32, lid: u32) {
    let C = prm.C;
    let base = r * C;
    var s = 0.0;
    for (var i = lid; i < C; i += WG) {
        s += inp[base + i];
    }
    let m = sum2(lid, s, 0.0).x / f32(C);
    var vs = 0.0;
    for (var i = lid; i < C; i += WG) {
        let d = inp[base + i] - m;
        vs += d * d;
    }
    let rs = 1.0 / sqrt(sum2(lid, vs, 0.0).x / f32(C) + 1e-5);
    for (var i = lid; i < C; i += WG) {
        let gb = gainShift(i);
        out[base + i] = (inp[base + i] - m) * rs * gb.x + gb.y;
    }
    if (lid == 0u) {
        mean[r] = m;
        rstd[r] = rs;
    }
}

// gainShift returns the gain and shift of column i: g[i] and bd[i], or with packed both from
// the window of parameters bound as g.
fn gainShift(i: u32) -> vec2<f32> {
    if (prm.packed != 0u) {
        return vec2<f32>(g[prm.gOff + i], g[prm.bOff + i]);
    }
    return vec2<f32>(g[i], bd[i]);
}

// backward: dg and db; forward_add and forward_slices: the residual add's two inputs.
@group(0) @binding(7) var<storage, read_write> b7: array<f32>;
@group(0) @binding(8) var<storage, read_write> b8: array<f32>;

// forward_add is a residual add followed by the layer norm of its result: inp = b7 + b8 (the
// sum is kept, as the add would leave it), then forward's pass over inp. Each thread adds the
// elements it later reads back, so no barrier is needed between the two.
@compute @workgroup_size(64)
fn forward_add(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let r = rowIndex(wg, nwg);
    if (r >= prm.N) {
        return; // uniform across the workgroup
    }
    let base = r * prm.C;
    for (var i = lid; i < prm.C; i += WG) {
        inp[base + i] = b7[base + i] + b8[base + i];
    }
    normRow(r, lid);
}

// forward_slices is forward_add whose branch is a linear layer with its inner dimension split
// into slices: b8 holds the slices' partial sums, [slices][N][C], and the window of parameters
// bound as g holds the layer's bias (at biasOff) beside the gains and shifts (packed). The
// branch's element is the slices' sum in slice order plus the bias, as matmul.wgsl's reduce
// finishes it, then inp = b7 + branch: the same bits as the product's reduce followed by
// forward_add, one dispatch fewer. (The two as one entry point, the branch chosen by a
// parameter, made xl's step 0.8% slower on an H200: docs/performance.md, forty-third session.)
@compute @workgroup_size(64)
fn forward_slices(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let r = rowIndex(wg, nwg);
    if (r >= prm.N) {
        return; // uniform across the workgroup
    }
    let base = r * prm.C;
    let stride = prm.N * prm.C;
    for (var i = lid; i < prm.C; i += WG) {
        var v = 0.0;
        for (var s = 0u; s < prm.slices; s++) {
            v += b8[s * stride + base + i];
        }
        inp[base + i] = b7[base + i] + (v + g[prm.biasOff + i]);
    }
    normRow(r, lid);
}
