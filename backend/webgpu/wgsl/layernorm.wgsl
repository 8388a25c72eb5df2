// LayerNorm over rows of width C (eps 1e-5, biased variance) and its backward pass. Forward
// and the input gradient use one workgroup of 64 threads per row with tree reductions in
// workgroup memory; the parameter gradients (and the bias gradient of a linear layer) use one
// thread per column summing the rows in order.

struct Params {
    N: u32,
    C: u32,
}

@group(0) @binding(0) var<uniform> prm: Params;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;  // out | din | dg
@group(0) @binding(2) var<storage, read_write> mean: array<f32>;
@group(0) @binding(3) var<storage, read_write> rstd: array<f32>;
@group(0) @binding(4) var<storage, read_write> inp: array<f32>;
@group(0) @binding(5) var<storage, read_write> g: array<f32>;   // g | g | db
@group(0) @binding(6) var<storage, read_write> bd: array<f32>;  // b | dout | dout

const WG: u32 = 64u;
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
        out[base + i] = (inp[base + i] - m) * rs * g[i] + bd[i];
    }
    if (lid == 0u) {
        mean[r] = m;
        rstd[r] = rs;
    }
}

// din += (dnorm − mean(dnorm) − norm·mean(dnorm·norm))·rstd, dnorm = dout·g
@compute @workgroup_size(64)
fn backward_input(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let r = rowIndex(wg, nwg);
    if (r >= prm.N) {
        return;
    }
    let C = prm.C;
    let base = r * C;
    let m = mean[r];
    let rs = rstd[r];
    var a = 0.0;
    var b = 0.0;
    for (var i = lid; i < C; i += WG) {
        let norm = (inp[base + i] - m) * rs;
        let dnorm = bd[base + i] * g[i];
        a += dnorm;
        b += dnorm * norm;
    }
    let sums = sum2(lid, a, b) / f32(C);
    for (var i = lid; i < C; i += WG) {
        let norm = (inp[base + i] - m) * rs;
        let dnorm = bd[base + i] * g[i];
        out[base + i] += (dnorm - sums.x - norm * sums.y) * rs;
    }
}

// dg[c] += Σ_r dout[r,c]·norm[r,c];  db[c] += Σ_r dout[r,c]
@compute @workgroup_size(64)
fn backward_params(@builtin(global_invocation_id) id: vec3<u32>) {
    let c = id.x;
    if (c >= prm.C) {
        return;
    }
    let C = prm.C;
    var sg = 0.0;
    var sb = 0.0;
    for (var r = 0u; r < prm.N; r++) {
        let dy = bd[r * C + c];
        sg += dy * (inp[r * C + c] - mean[r]) * rstd[r];
        sb += dy;
    }
    out[c] += sg;
    g[c] += sb;
}

// db[c] += Σ_r dout[r,c] (a linear layer's bias gradient; binding 1 is db, 6 is dout).
@compute @workgroup_size(64)
fn bias_backward(@builtin(global_invocation_id) id: vec3<u32>) {
    let c = id.x;
    if (c >= prm.C) {
        return;
    }
    var s = 0.0;
    for (var r = 0u; r < prm.N; r++) {
        s += bd[r * prm.C + c];
    }
    out[c] += s;
}
