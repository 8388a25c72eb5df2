// GELU's pieces, shared by elementwise.wgsl and matmul.wgsl (whose products can end in a GELU):
// the Go side prepends this file to theirs.

// Φ(v), the normal CDF, as on the CPU (backend/cpu/elementwise_amd64.s): for a = |v|/√2
// (clamped to 7.5, where erfc is 3e-26), erfc(a) = t·exp(−a² + P(u)) with t = 1/(1 + a/2),
// u = (t − tc)/th mapping t to [−1, 1], and P the degree-10 least-squares fit at Chebyshev
// nodes of python/gen_elementwise_asm.py (relative error 2e-9 in float64).
fn normalCDF(v: f32) -> f32 {
    let a = min(abs(v) * 0.70710678118654752, 7.5);
    let t = 1.0 / (1.0 + 0.5 * a);
    let u = (t - 0.6052631578947368) * 2.533333333333333;
    var p = -1.5281510e-05;
    p = p * u + 2.6744638e-05;
    p = p * u + 1.0416572e-04;
    p = p * u - 3.2599794e-04;
    p = p * u - 3.3828799e-04;
    p = p * u + 2.7406178e-03;
    p = p * u - 6.6222259e-05;
    p = p * u - 2.5158577e-02;
    p = p * u + 9.9440720e-03;
    p = p * u + 5.4162866e-01;
    p = p * u - 5.2853990e-01;
    let erfca = t * exp(p - a * a); // erfc(|v|/√2)
    if (v >= 0.0) {
        return 1.0 - 0.5 * erfca;
    }
    return 0.5 * erfca;
}

// geluGrad returns GELU'(v) = Φ(v) + v·φ(v), given cdf = Φ(v).
fn geluGrad(v: f32, cdf: f32) -> f32 {
    return cdf + v * exp(-0.5 * v * v) * 0.39894228040143268;
}
