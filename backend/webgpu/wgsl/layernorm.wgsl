// LayerNorm over rows of width C (eps 1e-5, biased variance) and its backward pass. Forward
// and the input gradient use 64 threads per row with tree reductions in workgroup memory; the
// parameter gradients (and the bias gradient of a linear layer) are column sums over the rows.

struct Params {
    N: u32,
    C: u32,
}

@group(0) @binding(0) var<uniform> prm: Params;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;  // out | din | db
@group(0) @binding(2) var<storage, read_write> mean: array<f32>;
@group(0) @binding(3) var<storage, read_write> rstd: array<f32>;
@group(0) @binding(4) var<storage, read_write> inp: array<f32>;
@group(0) @binding(5) var<storage, read_write> g: array<f32>;
@group(0) @binding(6) var<storage, read_write> bd: array<f32>;  // b | dout | dout
// (forward | backward | bias_backward; backward and forward_add also bind 7 and 8)

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
        out[base + i] = (inp[base + i] - m) * rs * g[i] + bd[i];
    }
    if (lid == 0u) {
        mean[r] = m;
        rstd[r] = rs;
    }
}

// backward: dg and db; forward_add: the residual add's two inputs.
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

// The backward pass, input and parameter gradients in one dispatch of 256-thread workgroups:
// the first ceil(C/PC) workgroups sum the parameter gradients' columns (paramColumns), each
// of the others computes the input gradient of four rows, 64 threads a row (inputRows).
@compute @workgroup_size(256)
fn backward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let w = rowIndex(wg, nwg);
    let colGroups = (prm.C + PC - 1u) / PC;
    if (w < colGroups) {
        paramColumns(w, lid);
    } else {
        inputRows(w - colGroups, lid);
    }
}

// inputRows: din += (dnorm − mean(dnorm) − norm·mean(dnorm·norm))·rstd, dnorm = dout·g, for
// rows 4·q .. 4·q+3, thread lid's row 4·q + lid/64. (No early return: the reductions'
// barriers need every thread of the workgroup.)
var<workgroup> red4: array<f32, 512>;

fn inputRows(q: u32, lid: u32) {
    let r = 4u * q + lid / 64u;
    let l = lid % 64u;
    let C = prm.C;
    let valid = r < prm.N;
    let rr = select(0u, r, valid);
    let base = rr * C;
    let m = mean[rr];
    let rs = rstd[rr];
    var a = 0.0;
    var b = 0.0;
    if (valid) {
        for (var i = l; i < C; i += WG) {
            let norm = (inp[base + i] - m) * rs;
            let dnorm = bd[base + i] * g[i];
            a += dnorm;
            b += dnorm * norm;
        }
    }
    // Tree sums of a and b over each row's 64 threads, as sum2 does for a workgroup's one row
    // (a shared version, with the row as a parameter, made huge's step 0.5% slower on an H200).
    let o = (lid / 64u) * 128u;
    red4[o + l] = a;
    red4[o + WG + l] = b;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (l < s) {
            red4[o + l] += red4[o + l + s];
            red4[o + WG + l] += red4[o + WG + l + s];
        }
        workgroupBarrier();
    }
    let sums = vec2<f32>(red4[o], red4[o + WG]) / f32(C);
    if (valid) {
        for (var i = l; i < C; i += WG) {
            let norm = (inp[base + i] - m) * rs;
            let dnorm = bd[base + i] * g[i];
            out[base + i] += (dnorm - sums.x - norm * sums.y) * rs;
        }
    }
}

// Column sums: a workgroup of cols × lanes threads owns cols adjacent columns; thread (x, y)
// sums rows y, y+lanes, y+2·lanes, ... of column x (consecutive columns are read together)
// into colA and colB at y·cols + x, then reduceColumns adds the lanes partial sums of each
// column as a tree, leaving the totals in row 0. The order is fixed, so results repeat.
var<workgroup> colA: array<f32, 256>;
var<workgroup> colB: array<f32, 256>;

fn reduceColumns(x: u32, y: u32, cols: u32, lanes: u32) {
    workgroupBarrier();
    for (var s = lanes / 2u; s > 0u; s >>= 1u) {
        if (y < s) {
            let i = y * cols + x;
            colA[i] += colA[i + s * cols];
            colB[i] += colB[i + s * cols];
        }
        workgroupBarrier();
    }
}

// paramColumns: dg[c] += Σ_r dout[r,c]·norm[r,c];  db[c] += Σ_r dout[r,c] for the PC
// columns of column group w. Thread lid sums column lid % PC over rows lid / PC + k·PL in
// four interleaved partial sums (four rows' loads in flight, not one: a thread's rows are many
// when the columns are few), then reduceColumns adds the PL partial sums of each column.
const PC: u32 = 8u;  // columns per workgroup
const PL: u32 = 32u; // threads per column
fn paramColumns(w: u32, lid: u32) {
    let C = prm.C;
    let N = prm.N;
    let x = lid % PC;
    let y = lid / PC;
    let c = w * PC + x;
    var sg = vec4<f32>(0.0);
    var sb = vec4<f32>(0.0);
    if (c < C) {
        var r = y;
        for (; r + 3u * PL < N; r += 4u * PL) {
            let rv = vec4<u32>(r, r + PL, r + 2u * PL, r + 3u * PL);
            let dy = vec4<f32>(bd[rv.x * C + c], bd[rv.y * C + c], bd[rv.z * C + c], bd[rv.w * C + c]);
            let xv = vec4<f32>(inp[rv.x * C + c], inp[rv.y * C + c], inp[rv.z * C + c], inp[rv.w * C + c]);
            let mv = vec4<f32>(mean[rv.x], mean[rv.y], mean[rv.z], mean[rv.w]);
            let sv = vec4<f32>(rstd[rv.x], rstd[rv.y], rstd[rv.z], rstd[rv.w]);
            sg += dy * (xv - mv) * sv;
            sb += dy;
        }
        for (; r < N; r += PL) {
            let dy = bd[r * C + c];
            sg.x += dy * (inp[r * C + c] - mean[r]) * rstd[r];
            sb.x += dy;
        }
    }
    colA[lid] = (sg.x + sg.y) + (sg.z + sg.w);
    colB[lid] = (sb.x + sb.y) + (sb.z + sb.w);
    reduceColumns(x, y, PC, PL);
    if (y == 0u && c < C) {
        b7[c] += colA[x];
        b8[c] += colB[x];
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
    reduceColumns(lid.x, lid.y, 16u, 16u);
    if (lid.y == 0u && c < C) {
        out[c] += colA[lid.x];
    }
}
