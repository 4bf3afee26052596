//! The residual stream (`Residual::Single`: one vector per token), as device/residual.rs: a part
//! reads rms_norm(x) * norm and its output is added back, through its post norm when it has one.

use super::ops::rms_norm;

/// A part's input.
pub fn read(x: &[f32], norm: &[f32], eps: f32) -> Vec<f32> {
    rms_norm(x, norm, eps)
}

/// x += o, or x += rms_norm(o) * post.
pub fn write(x: &mut [f32], o: Vec<f32>, post: Option<&[f32]>, eps: f32) {
    let o = match post {
        Some(g) => rms_norm(&o, g, eps),
        None => o,
    };
    for (xv, o) in x.iter_mut().zip(o) {
        *xv += o;
    }
}
