// LayerNorm's backward pass (the parameters, bindings and helpers are layernorm.wgsl's, which
// the Go side puts before this file): the input gradient uses 64 threads per row with tree
// reductions in workgroup memory; the parameter gradients (and the bias gradient of a linear
// layer) are column sums over the rows.

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
