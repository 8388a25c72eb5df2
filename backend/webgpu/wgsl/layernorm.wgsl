// LayerNorm over rows of width C (eps 1e-5, biased variance) and its backward pass. Forward
// and the input gradient use one workgroup of 64 threads per row with tree reductions in
// workgroup memory; the parameter gradients (and the bias gradient of a linear layer) are
// column sums over the rows.

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

// Column sums: a workgroup of 16×16 threads owns 16 adjacent columns; thread (x, y) sums rows
// y, y+16, y+32, ... of column x (16 consecutive columns are read together), then the 16
// partial sums of each column are added as a tree. The order is fixed, so results repeat.
var<workgroup> colA: array<f32, 256>;
var<workgroup> colB: array<f32, 256>;

fn reduceColumns(lid: vec3<u32>) {
    workgroupBarrier();
    for (var s = 8u; s > 0u; s >>= 1u) {
        if (lid.y < s) {
            let i = lid.y * 16u + lid.x;
            colA[i] += colA[i + s * 16u];
            colB[i] += colB[i + s * 16u];
        }
        workgroupBarrier();
    }
}

// dg[c] += Σ_r dout[r,c]·norm[r,c];  db[c] += Σ_r dout[r,c]
@compute @workgroup_size(16, 16)
fn backward_params(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let C = prm.C;
    let c = wg.x * 16u + lid.x;
    var sg = 0.0;
    var sb = 0.0;
    if (c < C) {
        for (var r = lid.y; r < prm.N; r += 16u) {
            let dy = bd[r * C + c];
            sg += dy * (inp[r * C + c] - mean[r]) * rstd[r];
            sb += dy;
        }
    }
    colA[lid.y * 16u + lid.x] = sg;
    colB[lid.y * 16u + lid.x] = sb;
    reduceColumns(lid);
    if (lid.y == 0u && c < C) {
        out[c] += colA[lid.x];
        g[c] += colB[lid.x];
    }
}

// db[c] += Σ_r dout[r,c] (a linear layer's bias gradient; binding 1 is db, 6 is dout).
@compute @workgroup_size(16, 16)
fn bias_backward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let C = prm.C;
    let c = wg.x * 16u + lid.x;
    var s = 0.0;
    if (c < C) {
        for (var r = lid.y; r < prm.N; r += 16u) {
            s += bd[r * C + c];
        }
    }
    colA[lid.y * 16u + lid.x] = s;
    colB[lid.y * 16u + lid.x] = 0.0;
    reduceColumns(lid);
    if (lid.y == 0u && c < C) {
        out[c] += colA[lid.x];
    }
}
