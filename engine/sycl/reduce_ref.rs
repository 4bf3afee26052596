//! Rust references for `sycl/kernels/reduce.cpp` (f64 accumulation).

/// Sum of `scale * x[i]`, accumulated in f64.
pub fn sum_ref(x: &[f32], scale: f32) -> f64 {
    x.iter().map(|&v| v as f64 * scale as f64).sum()
}

/// Per-group partials as `reduce_sg_sum` forms them: group `g` of `wg` items over a grid of
/// `groups * wg` items sums the grid-stride elements of its items. f64 accumulation.
pub fn partials_ref(x: &[f32], groups: usize, wg: usize) -> Vec<f64> {
    let stride = groups * wg;
    let mut out = vec![0f64; groups];
    for (i, &v) in x.iter().enumerate() {
        out[(i % stride) / wg] += v as f64;
    }
    out
}

/// A bound on |float sum - exact sum| for n terms of magnitude sum `abs_sum`: n * eps * sum|x|
/// (the classic worst case for any summation order).
pub fn sum_error_bound(x: &[f32]) -> f64 {
    let abs: f64 = x.iter().map(|&v| (v as f64).abs()).sum();
    x.len() as f64 * f32::EPSILON as f64 * abs
}
