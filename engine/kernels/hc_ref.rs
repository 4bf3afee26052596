//! The f64 reference of the hyper-connection read (`hc.rs`, docs/hyper-connections.md): the five
//! outputs from host slices, the weights dequantized by engine/quant. Beside each output it gives
//! the scale its f32 error is measured against (the Σ|w·x| of the sums behind it, and how an
//! error upstream reaches it), for the parity test's bound.

use crate::quant::{self, QuantError};

/// A weight matrix on the host: GGUF bytes and ggml type.
#[derive(Clone, Copy)]
pub struct HcHostMat<'a> {
    pub bytes: &'a [u8],
    pub type_id: u32,
}

/// One read site's weights on the host (the shapes of `hc::HcCall`).
#[derive(Clone, Copy)]
pub struct HcHost<'a> {
    pub n: usize,
    pub streams: usize,
    pub rank: usize,
    pub gamma: &'a [f32],              // (S, n)
    pub down: HcHostMat<'a>,           // (r, S * n)
    pub up: HcHostMat<'a>,             // (S * n, r)
    pub inject: Option<HcHostMat<'a>>, // (S, S * n)
}

/// The reference outputs for t rows, and the error scale of each f64 output.
pub struct HcRef {
    /// (t, S, n) H' = H + a * y in f32, exactly as the kernel must write it (a product rounded
    /// before its add)
    pub r_out: Vec<f32>,
    pub rs: Vec<f64>,    // (t, S)
    pub lo: Vec<f64>,    // (t, r)
    pub a: Vec<f64>,     // (t, S) the injection; empty without injection rows
    pub mixed: Vec<f64>, // (t, n)
    /// Error scales: rs[i] itself (a relative error); lo: Σ_k |W_down[j,k] Ĥ[t,k]|; a: how the
    /// z sum's Σ|w·x| reaches 2 sigmoid(z / S) (slope <= 1/(2S)) plus |a| for the sigmoid's own
    /// rounding; mixed: (1/S) Σ_s (|gate Ĥ| + |Ĥ| / 4 * the gate logit's scale), that scale
    /// being Σ_j |W_up[K,j] u_j| plus lo's scale carried through silu(lo / S) (slope <= 1.1 / S).
    pub rs_mag: Vec<f64>,
    pub lo_mag: Vec<f64>,
    pub a_mag: Vec<f64>,
    pub mixed_mag: Vec<f64>,
}

fn dequant(m: &HcHostMat, rows: usize, cols: usize) -> Result<Vec<f32>, QuantError> {
    let mut out = vec![0.0f32; rows * cols];
    quant::dequantize_by_type(m.type_id, m.bytes, &mut out)?;
    Ok(out)
}

fn sigmoid(v: f64) -> f64 {
    1.0 / (1.0 + (-v).exp())
}

/// The read of `t` rows of `x` (t, S, n) with the pending write (y (t, n), a (t, S)) if any,
/// in f64 after the f32 pending write.
pub fn reference(
    w: &HcHost,
    x: &[f32],
    pending: Option<(&[f32], &[f32])>,
    t: usize,
    eps: f32,
) -> Result<HcRef, QuantError> {
    let (n, s, r) = (w.n, w.streams, w.rank);
    let k_cols = s * n;
    let down = dequant(&w.down, r, k_cols)?;
    let up = dequant(&w.up, k_cols, r)?;
    let inj = w.inject.map(|m| dequant(&m, s, k_cols)).transpose()?;
    let n_inj = if inj.is_some() { s } else { 0 };

    let mut r_out = x[..t * k_cols].to_vec();
    if let Some((y, a)) = pending {
        for (row, h) in r_out.chunks_mut(n).enumerate() {
            let (ti, av) = (row / s, a[row]);
            for (k, v) in h.iter_mut().enumerate() {
                *v += av * y[ti * n + k];
            }
        }
    }
    let mut out = HcRef {
        rs: Vec::with_capacity(t * s),
        lo: Vec::with_capacity(t * r),
        a: Vec::with_capacity(t * n_inj),
        mixed: Vec::with_capacity(t * n),
        rs_mag: Vec::with_capacity(t * s),
        lo_mag: Vec::with_capacity(t * r),
        a_mag: Vec::with_capacity(t * n_inj),
        mixed_mag: Vec::with_capacity(t * n),
        r_out: Vec::new(),
    };
    let sf = s as f64;
    for ti in 0..t {
        let h = &r_out[ti * k_cols..(ti + 1) * k_cols];
        // Ĥ = rs * H' * gamma, per stream
        let mut hat = vec![0.0f64; k_cols];
        for si in 0..s {
            let hs = &h[si * n..(si + 1) * n];
            let ss: f64 = hs.iter().map(|&v| v as f64 * v as f64).sum();
            let rs = 1.0 / (ss / n as f64 + eps as f64).sqrt();
            out.rs.push(rs);
            out.rs_mag.push(rs);
            for k in 0..n {
                hat[si * n + k] = rs * hs[k] as f64 * w.gamma[si * n + k] as f64;
            }
        }
        // lo, z with their Σ|w·x|
        let dot = |row: &[f32]| -> (f64, f64) {
            row.iter().zip(&hat).fold((0.0, 0.0), |(v, m), (&wv, &xv)| {
                (v + wv as f64 * xv, m + (wv as f64 * xv).abs())
            })
        };
        let mut u = Vec::with_capacity(r);
        let mut lo_mag = Vec::with_capacity(r);
        for j in 0..r {
            let (v, m) = dot(&down[j * k_cols..(j + 1) * k_cols]);
            out.lo.push(v);
            out.lo_mag.push(m);
            lo_mag.push(m);
            u.push(v / sf * sigmoid(v / sf));
        }
        if let Some(inj) = &inj {
            for j in 0..s {
                let (z, m) = dot(&inj[j * k_cols..(j + 1) * k_cols]);
                let a = 2.0 * sigmoid(z / sf);
                out.a.push(a);
                out.a_mag.push(m / (2.0 * sf) + a);
            }
        }
        // gate logits and the gated stream mean
        let mut mixed = vec![0.0f64; n];
        let mut mixed_mag = vec![0.0f64; n];
        for (col, row) in up.chunks(r).enumerate() {
            let (si, k) = (col / n, col % n);
            let mut p = 0.0f64;
            let mut p_mag = 0.0f64;
            for j in 0..r {
                let wv = row[j] as f64;
                p += wv * u[j];
                p_mag += (wv * u[j]).abs() + wv.abs() * 1.1 / sf * lo_mag[j];
            }
            let gate = sigmoid(p);
            let hv = hat[si * n + k];
            mixed[k] += gate * hv;
            mixed_mag[k] += (gate * hv).abs() + hv.abs() * 0.25 * p_mag;
        }
        out.mixed.extend(mixed.iter().map(|v| v / sf));
        out.mixed_mag.extend(mixed_mag.iter().map(|v| v / sf));
    }
    out.r_out = r_out;
    Ok(out)
}

/// The largest |got - want| / scale over one output (the parity checks' error measure; NaN and
/// a length mismatch count as infinite).
pub fn worst_error(got: &[f32], want: &[f64], scale: &[f64]) -> f64 {
    if got.len() != want.len() || want.len() != scale.len() {
        return f64::INFINITY;
    }
    got.iter()
        .zip(want)
        .zip(scale)
        .map(|((&g, &w), &m)| {
            let e = (g as f64 - w).abs() / m.max(f64::MIN_POSITIVE);
            if e.is_nan() {
                f64::INFINITY
            } else {
                e
            }
        })
        .fold(0.0, f64::max)
}
