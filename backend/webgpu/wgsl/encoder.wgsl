// Token and position embeddings. Forward: out[r, :] = wte[tok[r], :] + wpe[pos0 + r%T, :].
// Backward, without atomics and in a fixed order: each element of dwte gets the rows of dout
// whose token selects it added in row order (see backward_wte), each element of dwpe the
// batch's rows at its position.

struct Params {
    n: u32,    // rows B·T (backward_wpe: the end of the sequences it sums, times T)
    C: u32,
    T: u32,
    pos0: u32, // forward: the first row's position; backward_wpe: the first sequence summed
    rows: u32, // rows of the gradient table this dispatch covers (V for dwte, T for dwpe)
}

@group(0) @binding(0) var<uniform> prm: Params;
@group(0) @binding(1) var<storage, read_write> out: array<f32>; // out, or dwte / dwpe
@group(0) @binding(2) var<storage, read_write> tok: array<i32>;
@group(0) @binding(3) var<storage, read_write> wte: array<f32>; // wte, or dout
@group(0) @binding(4) var<storage, read_write> wpe: array<f32>;

@compute @workgroup_size(256)
fn forward(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let total = prm.n * prm.C;
    for (var i = id.x; i < total; i += nwg.x * 256u) {
        let r = i / prm.C;
        let c = i % prm.C;
        // Tokens are clamped to the vocabulary (256): a bad id must not read outside wte.
        out[i] = wte[min(u32(tok[r]), 255u) * prm.C + c] + wpe[(prm.pos0 + r % prm.T) * prm.C + c];
    }
}

// dwte[v, c] += Σ_{r: tok[r] = v} dout[r, c], rows in order. A workgroup of 64 threads owns
// row v and 64 of its columns. Round by round over LIST rows of the batch, the threads list the
// rows whose token is v, in order (each counts the matches in its own run of rows, a prefix
// sum gives where its matches go), then each thread adds its column of the listed rows of
// dout. (One thread per element scanning every row took as long as a few products.)
// counts is written by every thread before it is read, listed only read below the rows just
// listed (workgroup memory is not zeroed on Vulkan: internal/gpu/zeroinit.go).
const LIST: u32 = 2048u;
var<workgroup> listed: array<u32, LIST>;
var<workgroup> counts: array<u32, 64>;

@compute @workgroup_size(64)
fn backward_wte(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let colBlocks = (prm.C + 63u) / 64u;
    let w = wg.y * nwg.x + wg.x;
    if (w >= prm.rows * colBlocks) {
        return; // uniform across the workgroup
    }
    let v = w / colBlocks;
    let c = (w % colBlocks) * 64u + lid;
    for (var r0 = 0u; r0 < prm.n; r0 += LIST) {
        let len = min(LIST, prm.n - r0);
        let per = (len + 63u) / 64u;
        let lo = r0 + min(lid * per, len);
        let hi = r0 + min((lid + 1u) * per, len);
        var cnt = 0u;
        for (var r = lo; r < hi; r++) {
            cnt += select(0u, 1u, tok[r] == i32(v));
        }
        // Inclusive prefix sum of the counts (Hillis-Steele).
        counts[lid] = cnt;
        workgroupBarrier();
        for (var d = 1u; d < 64u; d <<= 1u) {
            var x = 0u;
            if (lid >= d) {
                x = counts[lid - d];
            }
            workgroupBarrier();
            counts[lid] += x;
            workgroupBarrier();
        }
        var at = counts[lid] - cnt;
        for (var r = lo; r < hi; r++) {
            if (tok[r] == i32(v)) {
                listed[at] = r;
                at++;
            }
        }
        let total = counts[63];
        workgroupBarrier();
        if (c < prm.C) {
            var s = out[v * prm.C + c];
            var k = 0u;
            // Eight loads in flight, added in row order.
            for (; k + 8u <= total; k += 8u) {
                let x0 = wte[listed[k] * prm.C + c];
                let x1 = wte[listed[k + 1u] * prm.C + c];
                let x2 = wte[listed[k + 2u] * prm.C + c];
                let x3 = wte[listed[k + 3u] * prm.C + c];
                let x4 = wte[listed[k + 4u] * prm.C + c];
                let x5 = wte[listed[k + 5u] * prm.C + c];
                let x6 = wte[listed[k + 6u] * prm.C + c];
                let x7 = wte[listed[k + 7u] * prm.C + c];
                s = (((((((s + x0) + x1) + x2) + x3) + x4) + x5) + x6) + x7;
            }
            for (; k < total; k++) {
                s += wte[listed[k] * prm.C + c];
            }
            out[v * prm.C + c] = s;
        }
        workgroupBarrier(); // the list is rewritten in the next round
    }
}

// dwpe[t, c] += Σ_b dout[b·T + t, c] over the sequences b from pos0 to n/T, in order. The Go
// side sums the batch in several dispatches of a bounded number of sequences (wpeSeqs), each
// going on from the sums the one before left in dwpe: Mesa's lavapipe ends a kernel's loops
// after 65,535 iterations in all, without a word, and one dispatch over 65,536 sequences or
// more (context 1, a huge batch) summed only the first 65,535.
@compute @workgroup_size(256)
fn backward_wpe(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let total = prm.rows * prm.C;
    let end = prm.n / prm.T;
    for (var i = id.x; i < total; i += nwg.x * 256u) {
        let t = i / prm.C;
        let c = i % prm.C;
        var s = out[i];
        for (var b = prm.pos0; b < end; b++) {
            s += wte[(b * prm.T + t) * prm.C + c];
        }
        out[i] = s;
    }
}
