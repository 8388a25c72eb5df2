// Elementwise kernels: zero, copy, residual add, bias add, GELU and its gradient, product,
// dropout, and the embedding lookup. Each thread walks the elements i = id, id + stride, ... so one dispatch
// of at most 65535 workgroups covers any length. Bindings: x is the output; y and z inputs
// (unused ones are bound to any buffer); dropout also binds the seeds at 4.

struct Params {
    n: u32,      // elements
    C: u32,      // row width (bias, encoder)
    T: u32,      // sequence length (encoder)
    pos0: u32,   // position of the first row (encoder)
    p: f32,      // dropout probability
    site: u32,   // dropout: the entry of seeds that holds the mask's seed
    unused: u32,
    xOff: u32,   // copy: where the destination starts in x and the source in y (Copy binds a
    yOff: u32,   // view from the aligned offset at or below its start)
}

@group(0) @binding(0) var<uniform> prm: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<storage, read_write> z: array<f32>;
// The dropout seeds, two words (low, high) per site: backend.PutSeed's layout.
@group(0) @binding(4) var<storage, read_write> seeds: array<u32>;

const WG: u32 = 256u;

fn stride(nwg: vec3<u32>) -> u32 {
    return nwg.x * WG;
}

// x = 0
@compute @workgroup_size(256)
fn zero(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    for (var i = id.x; i < prm.n; i += stride(nwg)) {
        x[i] = 0.0;
    }
}

// x = y, from xOff and yOff on
@compute @workgroup_size(256)
fn copy(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    for (var i = id.x; i < prm.n; i += stride(nwg)) {
        x[prm.xOff + i] = y[prm.yOff + i];
    }
}

// x = y + z
@compute @workgroup_size(256)
fn add(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    for (var i = id.x; i < prm.n; i += stride(nwg)) {
        x[i] = y[i] + z[i];
    }
}

// x[r, c] += y[c] for n = rows·C elements.
@compute @workgroup_size(256)
fn add_bias(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    for (var i = id.x; i < prm.n; i += stride(nwg)) {
        x[i] += y[i % prm.C];
    }
}

// normalCDF and geluGrad are in gelu.wgsl, which the Go side puts before this file.

// x = GELU(y) = y·Φ(y); x and y may be the same buffer.
@compute @workgroup_size(256)
fn gelu(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    for (var i = id.x; i < prm.n; i += stride(nwg)) {
        let v = y[i];
        x[i] = v * normalCDF(v);
    }
}

// x = z·GELU'(y), GELU'(v) = Φ(v) + v·φ(v); x and z may be the same buffer.
@compute @workgroup_size(256)
fn gelu_backward(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    for (var i = id.x; i < prm.n; i += stride(nwg)) {
        let v = y[i];
        x[i] = z[i] * geluGrad(v, normalCDF(v));
    }
}

// x = y·z
@compute @workgroup_size(256)
fn mul(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    for (var i = id.x; i < prm.n; i += stride(nwg)) {
        x[i] = y[i] * z[i];
    }
}

// x = x·y (mul in place)
@compute @workgroup_size(256)
fn mul_into(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    for (var i = id.x; i < prm.n; i += stride(nwg)) {
        x[i] *= y[i];
    }
}

// 64-bit unsigned integers as vec2(low, high) for the dropout hash.
fn mulhi32(a: u32, b: u32) -> u32 {
    let a0 = a & 0xffffu;
    let a1 = a >> 16u;
    let b0 = b & 0xffffu;
    let b1 = b >> 16u;
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let p11 = a1 * b1;
    let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
    return p11 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u);
}

fn mul64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return vec2<u32>(a.x * b.x, mulhi32(a.x, b.x) + a.x * b.y + a.y * b.x);
}

// shr64 shifts right by s, 0 < s < 32.
fn shr64(a: vec2<u32>, s: u32) -> vec2<u32> {
    return vec2<u32>((a.x >> s) | (a.y << (32u - s)), a.y >> s);
}

// dropoutKeep is the CPU backend's DropoutKeep: SplitMix64's finaliser of seed ^ (i·golden).
fn dropoutKeep(seed: vec2<u32>, i: u32) -> bool {
    var h = seed ^ mul64(vec2<u32>(i, 0u), vec2<u32>(0x7F4A7C15u, 0x9E3779B9u));
    h = mul64(h ^ shr64(h, 30u), vec2<u32>(0x1CE4E5B9u, 0xBF58476Du));
    h = mul64(h ^ shr64(h, 27u), vec2<u32>(0x133111EBu, 0x94D049BBu));
    h = h ^ shr64(h, 31u);
    return f32(h.y >> 8u) * (1.0 / 16777216.0) >= prm.p;
}

// siteSeed is the seed of the dropout site prm.site.
fn siteSeed() -> vec2<u32> {
    return vec2<u32>(seeds[2u * prm.site], seeds[2u * prm.site + 1u]);
}

// x = y·keep/(1−p)
@compute @workgroup_size(256)
fn dropout(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let seed = siteSeed();
    let scale = 1.0 / (1.0 - prm.p);
    for (var i = id.x; i < prm.n; i += stride(nwg)) {
        x[i] = select(0.0, y[i] * scale, dropoutKeep(seed, i));
    }
}

// x = x·keep/(1−p) (dropout in place)
@compute @workgroup_size(256)
fn dropout_into(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let seed = siteSeed();
    let scale = 1.0 / (1.0 - prm.p);
    for (var i = id.x; i < prm.n; i += stride(nwg)) {
        x[i] = select(0.0, x[i] * scale, dropoutKeep(seed, i));
    }
}
