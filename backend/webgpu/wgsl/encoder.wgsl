// Token and position embeddings. Forward: out[r, :] = wte[tok[r], :] + wpe[pos0 + r%T, :].
// Backward, without atomics and in a fixed order: one thread per element of dwte sums the rows
// of dout whose token selects it (in row order), one thread per element of dwpe sums over the
// batch.

struct Params {
    n: u32,    // rows B·T
    C: u32,
    T: u32,
    pos0: u32,
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

// dwte[v, c] += Σ_{r: tok[r] = v} dout[r, c]
@compute @workgroup_size(256)
fn backward_wte(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let total = prm.rows * prm.C;
    for (var i = id.x; i < total; i += nwg.x * 256u) {
        let v = i32(i / prm.C);
        let c = i % prm.C;
        var s = out[i];
        for (var r = 0u; r < prm.n; r++) {
            if (tok[r] == v) {
                s += wte[r * prm.C + c];
            }
        }
        out[i] = s;
    }
}

// dwpe[t, c] += Σ_b dout[b·T + t, c]
@compute @workgroup_size(256)
fn backward_wpe(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let total = prm.rows * prm.C;
    for (var i = id.x; i < total; i += nwg.x * 256u) {
        let t = i / prm.C;
        let c = i % prm.C;
        var s = out[i];
        for (var r = t; r < prm.n; r += prm.T) {
            s += wte[r * prm.C + c];
        }
        out[i] = s;
    }
}
