// Causal multi-head attention, flash style: no T×T matrix is ever stored. One thread per
// (sequence, head, query): the forward pass streams over the keys with an online softmax (a
// running maximum m, a running sum l and a running weighted sum of values, rescaled whenever m
// grows) and saves lse = m + log(l); the backward pass recomputes each probability as
// exp(score − lse). Threads of a workgroup are consecutive queries of one head, so they read the
// same keys and values.
//
// Heads are column blocks of width HSL of the [rows, C] tensors. For the usual head sizes (up to
// 64) the Go side compiles a kernel per size, HSL and the per-thread arrays' size HS_MAX being
// that size, so that the loops over a head unroll and the arrays stay in registers (with a bound
// known only at run time they live in memory: several times slower on an NVIDIA H100). Wider
// heads share one kernel: HS_MAX = 256 and HSL = prm.HS.

const HS_MAX: u32 = HSMAXu;

struct Params {
    B: u32,
    NQ: u32,    // queries per sequence
    TK: u32,    // key rows per sequence
    C: u32,
    NH: u32,
    HS: u32,
    P0: u32,    // position of query 0 (0 in training, pos when decoding)
    scale: f32, // 1/sqrt(HS)
    saveLSE: u32,
    slices: u32, // backward: threads per row, each summing one slice of its partner rows into
                 // partial sums (slice s at element offset s·B·T·C of dq, dk and dv); forward: 1
}

@group(0) @binding(0) var<uniform> prm: Params;
// forward:        out, lse, q, k, v
// backward_dq:    dq, D, dout, q, k, v, out, lse
// backward_dkdv:  dk, dv, dout, q, k, v, D, lse
@group(0) @binding(1) var<storage, read_write> b1: array<f32>;
@group(0) @binding(2) var<storage, read_write> b2: array<f32>;
@group(0) @binding(3) var<storage, read_write> b3: array<f32>;
@group(0) @binding(4) var<storage, read_write> b4: array<f32>;
@group(0) @binding(5) var<storage, read_write> b5: array<f32>;
@group(0) @binding(6) var<storage, read_write> b6: array<f32>;
@group(0) @binding(7) var<storage, read_write> b7: array<f32>;
@group(0) @binding(8) var<storage, read_write> b8: array<f32>;

// task splits a flat thread index into (slice s, sequence b, head h, row i); ok is false past
// the end.
struct Task {
    b: u32,
    h: u32,
    i: u32,
    s: u32,
    ok: bool,
}

fn task(id: vec3<u32>, nwg: vec3<u32>, rows: u32) -> Task {
    let idx = id.y * nwg.x * 64u + id.x;
    var t: Task;
    t.ok = idx < prm.B * prm.NH * rows * prm.slices;
    t.i = idx % rows;
    let bhs = idx / rows;
    let bh = bhs % (prm.B * prm.NH);
    t.s = bhs / (prm.B * prm.NH);
    t.h = bh % prm.NH;
    t.b = bh / prm.NH;
    return t;
}

@compute @workgroup_size(64)
fn forward(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = task(id, nwg, prm.NQ);
    if (!t.ok) {
        return;
    }
    let col = t.h * HSL;
    let qrow = (t.b * prm.NQ + t.i) * prm.C + col;
    var qv: array<f32, HS_MAX>;
    var acc: array<f32, HS_MAX>;
    for (var e = 0u; e < HSL; e++) {
        qv[e] = b3[qrow + e];
        acc[e] = 0.0;
    }
    var m = -3.4028235e38;
    var l = 0.0;
    let last = t.i + prm.P0; // the query's position: keys 0..last are visible
    for (var j = 0u; j <= last; j++) {
        let krow = (t.b * prm.TK + j) * prm.C + col;
        var s = 0.0;
        for (var e = 0u; e < HSL; e++) {
            s = fma(qv[e], b4[krow + e], s);
        }
        s *= prm.scale;
        let mn = max(m, s);
        let corr = exp(m - mn);
        let p = exp(s - mn);
        l = l * corr + p;
        for (var e = 0u; e < HSL; e++) {
            acc[e] = acc[e] * corr + p * b5[krow + e];
        }
        m = mn;
    }
    let inv = 1.0 / l;
    for (var e = 0u; e < HSL; e++) {
        b1[qrow + e] = acc[e] * inv;
    }
    if (prm.saveLSE != 0u) {
        b2[(t.b * prm.NH + t.h) * prm.NQ + t.i] = m + log(l);
    }
}

// dq_i = scale · Σ_{j≤i} p_ij·(dout_i·v_j − D_i)·k_j, with D_i = dout_i·out_i (saved for dkdv).
// Query i's keys j ≤ i are split into prm.slices equal ranges, one thread each, as in
// backward_dkdv.
@compute @workgroup_size(64)
fn backward_dq(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = task(id, nwg, prm.NQ);
    if (!t.ok) {
        return;
    }
    let col = t.h * HSL;
    let T = prm.NQ;
    let row = (t.b * T + t.i) * prm.C + col;
    let li = (t.b * prm.NH + t.h) * T + t.i;
    var qv: array<f32, HS_MAX>;
    var dov: array<f32, HS_MAX>;
    var dq: array<f32, HS_MAX>;
    var D = 0.0;
    for (var e = 0u; e < HSL; e++) {
        qv[e] = b4[row + e];
        dov[e] = b3[row + e];
        dq[e] = 0.0;
        D = fma(dov[e], b7[row + e], D);
    }
    if (t.s == 0u) {
        b2[li] = D;
    }
    let lse = b8[li];
    let per = (t.i + prm.slices) / prm.slices; // ⌈(i+1)/slices⌉
    let lo = t.s * per;
    let hi = min(t.i + 1u, lo + per);
    for (var j = lo; j < hi; j++) {
        let krow = (t.b * T + j) * prm.C + col;
        var s = 0.0;
        var dp = 0.0;
        for (var e = 0u; e < HSL; e++) {
            s = fma(qv[e], b5[krow + e], s);
            dp = fma(dov[e], b6[krow + e], dp);
        }
        let p = exp(s * prm.scale - lse);
        let ds = p * (dp - D) * prm.scale;
        for (var e = 0u; e < HSL; e++) {
            dq[e] = fma(ds, b5[krow + e], dq[e]);
        }
    }
    let out = t.s * prm.B * T * prm.C + row;
    for (var e = 0u; e < HSL; e++) {
        b1[out + e] = dq[e];
    }
}

// dv_j = Σ_{i≥j} p_ij·dout_i;  dk_j = scale · Σ_{i≥j} p_ij·(dout_i·v_j − D_i)·q_i
// Key j's queries i ≥ j are split into prm.slices equal ranges, one thread each (a short
// sequence of keys would keep few threads busy, the first key's doing all the work).
@compute @workgroup_size(64)
fn backward_dkdv(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = task(id, nwg, prm.NQ);
    if (!t.ok) {
        return;
    }
    let col = t.h * HSL;
    let T = prm.NQ;
    let j = t.i;
    let row = (t.b * T + j) * prm.C + col;
    var kv: array<f32, HS_MAX>;
    var vv: array<f32, HS_MAX>;
    var dk: array<f32, HS_MAX>;
    var dv: array<f32, HS_MAX>;
    for (var e = 0u; e < HSL; e++) {
        kv[e] = b5[row + e];
        vv[e] = b6[row + e];
        dk[e] = 0.0;
        dv[e] = 0.0;
    }
    let per = (T - j + prm.slices - 1u) / prm.slices;
    let lo = j + t.s * per;
    let hi = min(T, lo + per);
    for (var i = lo; i < hi; i++) {
        let qrow = (t.b * T + i) * prm.C + col;
        let li = (t.b * prm.NH + t.h) * T + i;
        var s = 0.0;
        var dp = 0.0;
        for (var e = 0u; e < HSL; e++) {
            s = fma(b4[qrow + e], kv[e], s);
            dp = fma(b3[qrow + e], vv[e], dp);
        }
        let p = exp(s * prm.scale - b8[li]);
        let ds = p * (dp - b7[li]) * prm.scale;
        for (var e = 0u; e < HSL; e++) {
            dv[e] = fma(p, b3[qrow + e], dv[e]);
            dk[e] = fma(ds, b4[qrow + e], dk[e]);
        }
    }
    let out = t.s * prm.B * T * prm.C + row;
    for (var e = 0u; e < HSL; e++) {
        b1[out + e] = dk[e];
        b2[out + e] = dv[e];
    }
}
