// Global gradient norm and AdamW.
//
// sumsq_partial: each workgroup of 256 threads sums the squares of a fixed 4096-element chunk
// (per-thread partial sums, then a tree) into partial[chunk]. sumsq_final: one workgroup adds
// the partial sums in chunk order into acc[0]. The result does not depend on the device.
//
// adamw: the clip scale is read from the state's sum of squares on the device, never through
// the host, and so are the step's learning rate and bias corrections (state = [Σg², lr,
// 1 − β1^t, sqrt(1 − β2^t)], backend.AdamState).

struct Params {
    n: u32,
    beta1: f32,
    beta2: f32,
    eps: f32,
    wd: f32,
    clip: f32,
}

@group(0) @binding(0) var<uniform> prm: Params;
@group(0) @binding(1) var<storage, read_write> b1: array<f32>; // partial | acc     | p
@group(0) @binding(2) var<storage, read_write> b2: array<f32>; // x       | partial | g
@group(0) @binding(3) var<storage, read_write> b3: array<f32>; //                   | m
@group(0) @binding(4) var<storage, read_write> b4: array<f32>; //                   | v
@group(0) @binding(5) var<storage, read_write> b5: array<f32>; //                   | state

const WG: u32 = 256u;
const CHUNK: u32 = 4096u;
// Each thread writes its element before the reduction reads it (workgroup memory is not
// zeroed on Vulkan: internal/gpu/zeroinit.go).
var<workgroup> red: array<f32, 256>;

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

@compute @workgroup_size(256)
fn sumsq_partial(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let chunk = wg.y * nwg.x + wg.x;
    let lo = chunk * CHUNK;
    if (lo >= prm.n) {
        return;
    }
    let hi = min(lo + CHUNK, prm.n);
    var s = 0.0;
    for (var i = lo + lid; i < hi; i += WG) {
        let v = b2[i];
        s = fma(v, v, s);
    }
    s = reduceSum(lid, s);
    if (lid == 0u) {
        b1[chunk] = s;
    }
}

// acc[0] += Σ partial[0:n] (n = number of chunks), in order per thread and then as a tree.
@compute @workgroup_size(256)
fn sumsq_final(@builtin(local_invocation_index) lid: u32) {
    var s = 0.0;
    for (var i = lid; i < prm.n; i += WG) {
        s += b2[i];
    }
    s = reduceSum(lid, s);
    if (lid == 0u) {
        b1[0] += s;
    }
}

// finite reports whether x is neither NaN nor infinite (by its exponent bits: comparisons with
// NaN may be folded away by a shader compiler).
fn finite(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7f800000u) != 0x7f800000u;
}

// The CPU backend's AdamW, element by element (nothing changes if the squared norm is NaN or
// infinite):
//   g ← g·clipScale; m ← β1·m + (1−β1)·g; v ← β2·v + (1−β2)·g²
//   p ← p·(1 − lr·wd) − (lr/bc1)·m / (sqrt(v)/bc2sqrt + ε)
// with lr, bc1 and bc2sqrt the state's b5[1], b5[2] and b5[3].

// AdamStep holds what every element of a step's update uses.
struct AdamStep {
    gscale: f32,   // the gradients' clip factor
    lr: f32,
    stepSize: f32, // lr / bc1
    bc2sqrt: f32,
}

// adamStep reads the step's values from the state: the clip scale Clip/(norm+1e-6) when the
// global norm sqrt(b5[0]) exceeds Clip (else 1), the learning rate and the bias corrections.
fn adamStep() -> AdamStep {
    var gscale = 1.0;
    if (prm.clip > 0.0) {
        let norm = sqrt(b5[0]);
        if (norm > prm.clip) {
            gscale = prm.clip / (norm + 1e-6);
        }
    }
    return AdamStep(gscale, b5[1], b5[1] / b5[2], b5[3]);
}

// adamElement updates one parameter (at pi in b1, its gradient at gi in b2, its moments at mo
// in b3 and vo in b4) with weight decay wd.
fn adamElement(pi: u32, gi: u32, mo: u32, vo: u32, s: AdamStep, wd: f32) {
    let g = b2[gi] * s.gscale;
    let m = prm.beta1 * b3[mo] + (1.0 - prm.beta1) * g;
    let v = prm.beta2 * b4[vo] + (1.0 - prm.beta2) * g * g;
    b3[mo] = m;
    b4[vo] = v;
    let denom = sqrt(v) / s.bc2sqrt + prm.eps;
    b1[pi] = b1[pi] * (1.0 - s.lr * wd) - s.stepSize * m / denom;
}

@compute @workgroup_size(256)
fn adamw(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    if (!finite(b5[0])) {
        return;
    }
    let s = adamStep();
    for (var i = id.x; i < prm.n; i += nwg.x * WG) {
        adamElement(i, i, i, i, s, prm.wd);
    }
}

// adamw_multi is adamw over several parameter tensors in one dispatch: the trainer updates each
// parameter with its own call, and consecutive calls on views of the same four buffers are
// gathered into a table of segments, b6 (8 words each: element offsets of p, g, m, v in
// b1..b4, first element of the segment in the concatenation, length, weight decay, unused).
// Each thread walks the concatenation and finds its segment by binary search. prm.n is the
// total length and prm.wd the number of segments.
@group(0) @binding(6) var<storage, read_write> segs: array<u32>;

@compute @workgroup_size(256)
fn adamw_multi(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    if (!finite(b5[0])) {
        return;
    }
    let st = adamStep();
    let nseg = bitcast<u32>(prm.wd);
    for (var e = id.x; e < prm.n; e += nwg.x * WG) {
        var lo = 0u;
        var hi = nseg - 1u;
        while (lo < hi) { // the last segment starting at or before e
            let mid = (lo + hi + 1u) / 2u;
            if (segs[mid * 8u + 4u] <= e) {
                lo = mid;
            } else {
                hi = mid - 1u;
            }
        }
        let s = lo * 8u;
        let k = e - segs[s + 4u];
        adamElement(segs[s] + k, segs[s + 1u] + k, segs[s + 2u] + k, segs[s + 3u] + k, st,
            bitcast<f32>(segs[s + 6u]));
    }
}
