// Fused softmax cross-entropy: for each row of logits [N, V], loss = −log softmax(x)[target],
// and (with grad) dlogits = scale·(softmax(x) − onehot(target)). One workgroup of 256 threads
// per row. dlogits may be the logits buffer itself: every read of a row happens before the
// barrier that precedes its writes, and each thread overwrites only elements it read.

struct Params {
    N: u32,
    V: u32,
    grad: u32, // 0: losses only; 1: write dlogits too; 2: dlogits in place of the logits
    scale: f32,
}

@group(0) @binding(0) var<uniform> prm: Params;
@group(0) @binding(1) var<storage, read_write> losses: array<f32>;
@group(0) @binding(2) var<storage, read_write> dlogits: array<f32>;
@group(0) @binding(3) var<storage, read_write> logits: array<f32>;
@group(0) @binding(4) var<storage, read_write> targets: array<i32>;

const WG: u32 = 256u;
// Each thread writes its element before the reduction reads it (workgroup memory is not
// zeroed on Vulkan: internal/gpu/zeroinit.go).
var<workgroup> red: array<f32, 256>;

fn reduceMax(lid: u32, v: f32) -> f32 {
    red[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            red[lid] = max(red[lid], red[lid + s]);
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

fn reduceSum(lid: u32, v: f32) -> f32 {
    red[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            red[lid] += red[lid + s];
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

// logit reads element i of the logits: from dlogits when the gradient overwrites them (one
// binding of the buffer, not two that alias), else from logits.
fn logit(i: u32) -> f32 {
    if (prm.grad == 2u) {
        return dlogits[i];
    }
    return logits[i];
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let r = wg.y * nwg.x + wg.x;
    if (r >= prm.N) {
        return;
    }
    let V = prm.V;
    let base = r * V;
    var mx = -3.4028234e38;
    for (var i = lid; i < V; i += WG) {
        mx = max(mx, logit(base + i));
    }
    mx = reduceMax(lid, mx);
    var s = 0.0;
    for (var i = lid; i < V; i += WG) {
        s += exp(logit(base + i) - mx);
    }
    let tgt = min(u32(targets[r]), V - 1u); // clamped: a bad id must not read outside the row
    let xt = logit(base + tgt);
    s = reduceSum(lid, s); // its barriers order every read above before the writes below
    if (lid == 0u) {
        losses[r] = mx + log(s) - xt;
    }
    if (prm.grad != 0u) {
        let k = prm.scale / s;
        for (var i = lid; i < V; i += WG) {
            var d = exp(logit(base + i) - mx) * k;
            if (i == tgt) {
                d -= prm.scale;
            }
            dlogits[base + i] = d;
        }
    }
}
