//! Mixture-of-experts kernels (`sycl/kernels/moe.cpp`) for qwen4exp's MoE FFN, after llama.cpp's
//! build_moe_ffn with softmax gating and renormalised weights (qwen4exp hard-codes that gating):
//!
//! 1. `route`: router logits (t, n_expert) -> per token the softmax, the k most probable experts
//!    (descending probability, ties to the lower id) and their probabilities renormalised by
//!    their sum (clamped below at 6.103515625e-5 as llama.cpp does).
//! 2. The engine reads the ids back, groups the window's tokens per expert on the host
//!    (`group_by_expert`), `gather_rows` the grouped input rows, and runs each expert's products
//!    on its rows into one grouped output buffer.
//! 3. `combine`: y[t] = sum over slots j (in order) of w[t,j] * e_out[map[t,j]], plus the
//!    sigmoid-gated shared expert, with llama.cpp's roundings in llama.cpp's order.
//!
//! Every output element depends on its own token only, so multi-token calls are bitwise the
//! one-token calls.

use super::float_args::{ensure, holds, int, prod, round_up};
use crate::sycl::{kernels, Arg, Context, DeviceBuffer, Kernel, NdRange, Queue, Result, SyclError};

const OP: &str = "moe";

/// llama.cpp's lower clamp of the selected weights' sum: 6.103515625e-5 = 2^-14, the smallest
/// normal f16.
pub const WEIGHT_SUM_MIN: f32 = 1.0 / 16384.0;

/// The shared expert of `combine`: y[t, :] += out[t, :] * sigmoid(gate[t]).
#[derive(Clone, Copy)]
pub struct SharedExpert<'a> {
    pub out: &'a DeviceBuffer<f32>, // (t, n) the shared expert's FFN output
    pub gate: &'a DeviceBuffer<f32>, // (t) its gate logit (ffn_gate_inp_shexp . x), pre-sigmoid
}

/// The MoE kernels, built once per context.
pub struct MoeKernels {
    route: Kernel,
    gather: Kernel,
    combine: Kernel,
}

fn same<T: Copy, U: Copy>(a: &DeviceBuffer<T>, b: &DeviceBuffer<U>) -> bool {
    std::ptr::eq(a.as_ptr() as *const u8, b.as_ptr() as *const u8)
}

impl MoeKernels {
    pub fn new(ctx: &Context) -> Result<MoeKernels> {
        let m = ctx.module(&kernels::MOE, &[])?;
        Ok(MoeKernels {
            route: m.kernel("moe_route")?,
            gather: m.kernel("gather_rows")?,
            combine: m.kernel("moe_combine")?,
        })
    }

    /// Softmax over each token's `n_expert` logits into `probs` (llama.cpp's ffn_moe_probs), the
    /// top `k` expert ids into `ids` (descending probability; ties: lower id first) and their
    /// weights p / max(sum of the k p, 6.103515625e-5) into `weights`, both in selection order,
    /// the weights times `w_scale` unless it is 0 or 1 (llama.cpp's expert_weights_scale, which
    /// qwen4exp files do not set). A token whose logits hold NaN or +inf may get id -1:
    /// `group_by_expert` rejects it.
    #[allow(clippy::too_many_arguments)]
    pub fn route(
        &self,
        q: &Queue,
        logits: &DeviceBuffer<f32>,  // (t, n_expert)
        probs: &DeviceBuffer<f32>,   // (t, n_expert) the softmax; may be `logits` (in place)
        ids: &DeviceBuffer<i32>,     // (t, k) expert ids, selection order
        weights: &DeviceBuffer<f32>, // (t, k) renormalised probabilities, same order
        t: usize,
        n_expert: usize,
        k: usize,
        w_scale: f32,
    ) -> Result<()> {
        ensure(OP, (1..=n_expert).contains(&k), || {
            format!("route: k = {k} must be in [1, n_expert = {n_expert}]")
        })?;
        ensure(OP, w_scale.is_finite(), || {
            format!("route: w_scale {w_scale} is not finite")
        })?;
        ensure(OP, !same(weights, probs) && !same(weights, logits), || {
            "route: weights must not share the logits / probs buffer".to_string()
        })?;
        let rows = prod(OP, &[t, n_expert])?;
        holds(OP, "route logits", logits, rows)?;
        holds(OP, "route probs", probs, rows)?;
        holds(OP, "route ids", ids, prod(OP, &[t, k])?)?;
        holds(OP, "route weights", weights, prod(OP, &[t, k])?)?;
        if t == 0 {
            return Ok(());
        }
        int(OP, "route t * n_expert", rows)?;
        q.launch(
            &self.route,
            NdRange::d1(round_up(t, 16), 16),
            &[
                Arg::addr(logits),
                Arg::addr(probs),
                Arg::addr(ids),
                Arg::addr(weights),
                Arg::i32(int(OP, "t", t)?),
                Arg::i32(int(OP, "n_expert", n_expert)?),
                Arg::i32(int(OP, "k", k)?),
                Arg::f32(w_scale),
            ],
        )
    }

    /// out[i, :] = x[rows[i], :] for i < m (a host-built list: the window's tokens grouped by
    /// expert, `ExpertGroups::rows`). An index outside [0, n_src) gives a NaN row, never a wild
    /// read.
    #[allow(clippy::too_many_arguments)]
    pub fn gather_rows(
        &self,
        q: &Queue,
        x: &DeviceBuffer<f32>,    // (n_src, n)
        rows: &DeviceBuffer<i32>, // (m) source row of each output row
        out: &DeviceBuffer<f32>,  // (m, n); not `x`
        m: usize,
        n: usize,
        n_src: usize,
    ) -> Result<()> {
        ensure(OP, !same(x, out), || {
            "gather_rows: out must not be x".to_string()
        })?;
        holds(OP, "gather x", x, prod(OP, &[n_src, n])?)?;
        holds(OP, "gather rows", rows, m)?;
        holds(OP, "gather out", out, prod(OP, &[m, n])?)?;
        if m == 0 || n == 0 {
            return Ok(());
        }
        let global = prod(OP, &[m, round_up(n, 32)])?;
        int(OP, "gather m * n", global)?;
        q.launch(
            &self.gather,
            NdRange::d1(global, 32),
            &[
                Arg::addr(x),
                Arg::addr(rows),
                Arg::addr(out),
                Arg::i32(int(OP, "n", n)?),
                Arg::i32(int(OP, "n_src", n_src)?),
            ],
        )
    }

    /// y[t, :] = (w[t,0] e_out[map[t,0], :] + w[t,1] e_out[map[t,1], :]) + ... in slot order,
    /// every product rounded before its add (llama.cpp's ggml_mul, then ggml_add per slot), plus
    /// sh[t, :] * sigmoid(sg[t]) when `shared` is given. A map entry outside [0, n_rows) gives
    /// NaN. `y` may be the shared expert's output buffer, never `e_out`.
    #[allow(clippy::too_many_arguments)]
    pub fn combine(
        &self,
        q: &Queue,
        e_out: &DeviceBuffer<f32>,    // (n_rows, n) grouped expert outputs
        map: &DeviceBuffer<i32>,      // (t, k) row of e_out for token t's slot j
        weights: &DeviceBuffer<f32>,  // (t, k) route's weights, same slot order
        shared: Option<SharedExpert>, // out (t, n), gate (t)
        y: &DeviceBuffer<f32>,        // (t, n)
        t: usize,
        k: usize,
        n: usize,
        n_rows: usize,
    ) -> Result<()> {
        ensure(OP, k >= 1, || "combine: k must be at least 1".to_string())?;
        ensure(OP, !same(y, e_out), || {
            "combine: y must not be e_out (other tokens read its rows)".to_string()
        })?;
        holds(OP, "combine e_out", e_out, prod(OP, &[n_rows, n])?)?;
        holds(OP, "combine map", map, prod(OP, &[t, k])?)?;
        holds(OP, "combine weights", weights, prod(OP, &[t, k])?)?;
        holds(OP, "combine y", y, prod(OP, &[t, n])?)?;
        if let Some(s) = shared {
            holds(OP, "combine shared output", s.out, prod(OP, &[t, n])?)?;
            holds(OP, "combine shared gate", s.gate, t)?;
        }
        if t == 0 || n == 0 {
            return Ok(());
        }
        let global = prod(OP, &[t, round_up(n, 32)])?;
        int(OP, "combine t * n", global)?;
        int(OP, "combine t * k", prod(OP, &[t, k])?)?;
        let (sh, sg) = match shared {
            Some(s) => (Arg::addr(s.out), Arg::addr(s.gate)),
            None => (Arg::u64(0), Arg::u64(0)),
        };
        q.launch(
            &self.combine,
            NdRange::d1(global, 32),
            &[
                Arg::addr(e_out),
                Arg::addr(map),
                Arg::addr(weights),
                sh,
                sg,
                Arg::addr(y),
                Arg::i32(int(OP, "n", n)?),
                Arg::i32(int(OP, "k", k)?),
                Arg::i32(int(OP, "n_rows", n_rows)?),
            ],
        )
    }
}

/// A window's (token, slot) pairs grouped by expert (host side, from `route`'s ids read back).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpertGroups {
    /// (t * k) token of each grouped row: experts in ascending id, each expert's tokens in
    /// ascending order; `gather_rows`'s `rows`.
    pub rows: Vec<i32>,
    /// (n_expert + 1) expert e's grouped rows are offsets[e]..offsets[e + 1].
    pub offsets: Vec<usize>,
    /// (t, k) grouped row of token t's slot j; `combine`'s `map`.
    pub map: Vec<i32>,
}

/// Groups the (t, k) expert ids per expert, or an error naming an id outside [0, n_expert)
/// (route's -1 for a NaN row included).
pub fn group_by_expert(ids: &[i32], t: usize, k: usize, n_expert: usize) -> Result<ExpertGroups> {
    let total = prod(OP, &[t, k])?;
    ensure(OP, ids.len() == total, || {
        format!("group_by_expert: {} ids for t = {t}, k = {k}", ids.len())
    })?;
    int(OP, "group_by_expert t * k", total)?;
    let mut offsets = vec![0usize; n_expert + 1];
    for (i, &id) in ids.iter().enumerate() {
        if id < 0 || id as usize >= n_expert {
            return Err(SyclError::invalid(
                OP,
                format!(
                    "expert id {id} of token {} slot {} is outside [0, {n_expert})",
                    i / k,
                    i % k
                ),
            ));
        }
        offsets[id as usize + 1] += 1;
    }
    for e in 0..n_expert {
        offsets[e + 1] += offsets[e];
    }
    let mut next = offsets.clone();
    let (mut rows, mut map) = (vec![0i32; total], vec![0i32; total]);
    // the pairs in token order, so each expert's rows are in token order too
    for (i, &id) in ids.iter().enumerate() {
        let r = &mut next[id as usize];
        rows[*r] = (i / k) as i32; // < t <= t * k, which fits an i32 (checked above)
        map[i] = *r as i32; // < t * k, likewise
        *r += 1;
    }
    Ok(ExpertGroups { rows, offsets, map })
}

/// `route`'s reference in f64: softmax, top-k (ties to the lower id), renormalised weights.
pub struct RouteRef {
    pub probs: Vec<f64>,   // (t, n_expert)
    pub ids: Vec<i32>,     // (t, k)
    pub weights: Vec<f64>, // (t, k)
}

pub fn reference_route(logits: &[f32], n_expert: usize, k: usize, w_scale: f32) -> RouteRef {
    let mut r = RouteRef {
        probs: Vec::with_capacity(logits.len()),
        ids: Vec::new(),
        weights: Vec::new(),
    };
    for row in logits.chunks(n_expert) {
        let m = row
            .iter()
            .map(|&v| v as f64)
            .fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = row.iter().map(|&v| (v as f64 - m).exp()).collect();
        let s: f64 = e.iter().sum();
        let p: Vec<f64> = e.iter().map(|v| v / s).collect();
        let mut order: Vec<usize> = (0..n_expert).collect();
        // stable: equal probabilities keep the lower id first
        order.sort_by(|&a, &b| p[b].total_cmp(&p[a]));
        let top = &order[..k];
        let sum = top
            .iter()
            .map(|&i| p[i])
            .sum::<f64>()
            .max(WEIGHT_SUM_MIN as f64);
        let scale = if w_scale != 0.0 && w_scale != 1.0 {
            w_scale as f64
        } else {
            1.0
        };
        r.ids.extend(top.iter().map(|&i| i as i32));
        r.weights.extend(top.iter().map(|&i| p[i] / sum * scale));
        r.probs.extend(p);
    }
    r
}

/// `gather_rows`'s reference: the rows copied (NaN for an index outside the source).
pub fn reference_gather(x: &[f32], rows: &[i32], n: usize) -> Vec<f32> {
    let n_src = x.len() / n.max(1);
    let mut out = Vec::with_capacity(rows.len() * n);
    for &r in rows {
        if r >= 0 && (r as usize) < n_src {
            out.extend_from_slice(&x[r as usize * n..(r as usize + 1) * n]);
        } else {
            out.extend(std::iter::repeat_n(f32::NAN, n));
        }
    }
    out
}

/// `combine`'s reference in f64, and beside it each element's magnitude sum_j |w x| (+ |g sh|),
/// the scale of the f32 rounding error a bound should be relative to.
pub fn reference_combine(
    e_out: &[f32],                    // (n_rows, n)
    map: &[i32],                      // (t, k)
    weights: &[f32],                  // (t, k)
    shared: Option<(&[f32], &[f32])>, // sh (t, n), sg (t)
    n: usize,
    k: usize,
) -> (Vec<f64>, Vec<f64>) {
    let t = map.len() / k;
    let (mut y, mut mag) = (vec![0f64; t * n], vec![0f64; t * n]);
    for tok in 0..t {
        for c in 0..n {
            let (mut acc, mut m) = (0f64, 0f64);
            for j in 0..k {
                let r = map[tok * k + j] as usize;
                let v = weights[tok * k + j] as f64 * e_out[r * n + c] as f64;
                acc += v;
                m += v.abs();
            }
            if let Some((sh, sg)) = shared {
                let g = 1.0 / (1.0 + (-(sg[tok] as f64)).exp());
                let v = g * sh[tok * n + c] as f64;
                acc += v;
                m += v.abs();
            }
            y[tok * n + c] = acc;
            mag[tok * n + c] = m;
        }
    }
    (y, mag)
}
