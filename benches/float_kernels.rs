//! Float-kernel timings on the default card, median of several runs each, at the real models'
//! shapes: `cargo bench --bench float_kernels` (or `cargo run --release --bench ...`).
//! Attention is reported with the KV bytes it reads; the rest are small next to the matmuls.
//! `cargo bench --bench float_kernels -- fused` times only the fused kernels of the decode step
//! against the unfused sequences they replace (launches included), at T = 1, 8, 256, then the
//! norms folded into the projections (`mmvq_residual_norm`) against the product + norm launches,
//! at SmolLM2's o and down shapes over 30 layers' weights.

use half::f16;
use std::time::Instant;
use strata::kernels::act::Elementwise;
use strata::kernels::actq::{ActQ, ActRound};
use strata::kernels::attn::{Attention, AttnCall};
use strata::kernels::glu_q8::{Glu, GluQ8};
use strata::kernels::kv::KvStore;
use strata::kernels::norm::Norm;
use strata::kernels::norm_q8::NormQ8;
use strata::kernels::rope::{Rope, RopeMode, RopeTable};
use strata::kernels::rope_kv::{QkNorm, RopeKv, RopeKvShape};
use strata::kernels::softmax::Softmax;
use strata::sycl::{Card, Context, Queue, Result};

const RUNS: usize = 15;

/// Median wall time in microseconds of `f` followed by a queue wait (one warm-up run first).
fn median_us(q: &Queue, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    f()?;
    q.wait()?;
    let mut t: Vec<f64> = (0..RUNS)
        .map(|_| {
            let t0 = Instant::now();
            f()?;
            q.wait()?;
            Ok(t0.elapsed().as_secs_f64() * 1e6)
        })
        .collect::<Result<_>>()?;
    t.sort_by(|a, b| a.total_cmp(b));
    Ok(t[RUNS / 2])
}

fn main() -> Result<()> {
    strata::sycl::runtime::init();
    let card = Card::default_card()?;
    let (ctx, q) = (&card.context, &card.queue);
    println!("device: {}", card.device.info()?.name);
    if std::env::args().any(|a| a == "fused") {
        return fused(ctx, q);
    }
    let filled = |n: usize, v: f32| q.upload(&vec![v; n]);
    let cache = |n: usize| {
        q.upload(
            &(0..n)
                .map(|i| f16::from_f32(((i % 13) as f32 - 6.0) / 8.0))
                .collect::<Vec<_>>(),
        )
    };

    // attention: (name, n_head, n_kv, head_dim, n_ctx, window)
    for (name, nh, nkv, hd, n_ctx, window) in [
        ("SmolLM2", 9usize, 3usize, 64usize, 8192usize, 0usize),
        ("Gemma global", 4, 1, 256, 8192, 0),
        ("Gemma local", 4, 1, 256, 8192, 512),
    ] {
        let attn = Attention::new(ctx, hd)?;
        let (kc, vc) = (cache(nkv * n_ctx * hd)?, cache(nkv * n_ctx * hd)?);
        for (p0, t) in [100, 1000, 4000, 8000]
            .into_iter()
            .flat_map(|p| [(p, 1usize), (p, 5)])
        {
            let pos: Vec<i32> = (p0..p0 + t as i32).collect();
            let pd = q.upload(&pos)?;
            let qd = filled(t * nh * hd, 0.1)?;
            let out = q.alloc::<f32>(t * nh * hd)?;
            let us = median_us(q, || {
                let call = AttnCall {
                    qrows: &qd,
                    kc: &kc,
                    vc: &vc,
                    pos: &pd,
                    out: &out,
                    t,
                    n_head: nh,
                    n_kv_head: nkv,
                    n_ctx,
                    window,
                    scale: 0.125,
                };
                attn.run(q, &call)
            })?;
            let keys = if window > 0 {
                (p0 as usize + 1).min(window)
            } else {
                p0 as usize + 1
            };
            let bytes = (t * nh * keys * hd * 2 * 2) as f64; // K + V f16, per query head
            println!(
                "attention {name:13} T {t} pos {p0:5}: {us:8.1} us  ({:.1} GB/s of K/V reads per head)",
                bytes / us / 1e3
            );
        }
    }

    let norm = Norm::new(ctx)?;
    let rope = Rope::new(ctx)?;
    let kv = KvStore::new(ctx)?;
    let sm = Softmax::new(ctx)?;
    let ew = Elementwise::new(ctx)?;
    for t in [1usize, 8] {
        let x = filled(t * 640, 0.5)?;
        let w = filled(640, 1.0)?;
        let us = median_us(q, || norm.rms_norm(q, &x, &w, &x, t, 640, 1e-6))?;
        println!("rms_norm T {t} x 640: {us:.1} us");
        let qr = filled(t * 4 * 256, 0.5)?;
        let pd = q.upload(&vec![4000i32; t])?;
        let table = RopeTable::new(q, 1e6, 256)?;
        let us = median_us(q, || {
            rope.run(q, RopeMode::Neox, &qr, &pd, &table, t, 4, 256)
        })?;
        println!("rope neox T {t} x 4 x 256: {us:.1} us");
        let (kc, vc) = (cache(8192 * 256)?, cache(8192 * 256)?);
        let k = filled(t * 256, 0.25)?;
        let us = median_us(q, || kv.run(q, &k, &k, &kc, &vc, &pd, t, 1, 256, 8192))?;
        println!("kv_store T {t} x 1 x 256: {us:.1} us");
        let g = filled(t * 2048, 0.3)?;
        let us = median_us(q, || ew.gelu_mul(q, &g, &g, &g, t * 2048))?;
        println!("gelu_mul T {t} x 2048: {us:.1} us");
    }
    let logits = filled(262144, 0.01)?;
    let us = median_us(q, || sm.run(q, &logits, &logits, 1, 262144, 1.0))?;
    println!("softmax 1 x 262144: {us:.1} us");
    Ok(())
}

/// Fused kernels vs the unfused sequences they replace (Gemma 3 shapes: n_embd 640, 4 / 1 heads of
/// 256, n_ff 2048; SmolLM2's rope: 9 / 3 heads of 64), median us per call sequence.
fn fused(ctx: &Context, q: &Queue) -> Result<()> {
    let (norm, nq8, aq) = (Norm::new(ctx)?, NormQ8::new(ctx)?, ActQ::new(ctx)?);
    let (ew, g8) = (Elementwise::new(ctx)?, GluQ8::new(ctx)?);
    let (rope, kv, rkv) = (Rope::new(ctx)?, KvStore::new(ctx)?, RopeKv::new(ctx)?);
    let filled = |n: usize, v: f32| q.upload(&vec![v; n]);
    let n_ctx = 1024;
    for t in [1usize, 8, 256] {
        let (x, o) = (filled(t * 640, 0.5)?, filled(t * 640, 0.25)?);
        let (w, xq, h) = (
            filled(640, 1.0)?,
            filled(t * 640, 0.0)?,
            filled(t * 640, 0.0)?,
        );
        let r32 = ActRound::Q8Block32;
        let un = median_us(q, || {
            norm.rms_norm(q, &x, &w, &h, t, 640, 1e-6)?;
            aq.run(q, r32, &h, &xq, t * 640)
        })?;
        let fu = median_us(q, || nq8.rms_norm(q, &x, &w, &xq, t, 640, 1e-6, 32, None))?;
        println!("T {t:3} rms_norm + act_q8_32 (640): unfused {un:7.1} us, fused {fu:7.1} us");
        let un = median_us(q, || {
            norm.rms_norm_add(q, &o, &w, &x, t, 640, 1e-6)?;
            norm.rms_norm(q, &x, &w, &h, t, 640, 1e-6)?;
            aq.run(q, r32, &h, &xq, t * 640)
        })?;
        let fu = median_us(q, || {
            nq8.norm_add_norm(q, &o, &w, &x, &w, &xq, t, 640, 1e-6, 32, None)
        })?;
        println!("T {t:3} rms_norm_add + rms_norm + act_q8_32 (640): unfused {un:7.1} us, fused {fu:7.1} us");
        let n = t * 2048;
        let (g, u, y) = (filled(n, 0.3)?, filled(n, 0.7)?, filled(n, 0.0)?);
        let un = median_us(q, || {
            ew.gelu_mul(q, &g, &u, &y, n)?;
            aq.run(q, ActRound::Q8Block256, &y, &y, n)
        })?;
        let fu = median_us(q, || g8.run(q, Glu::GeluTanh, &g, &u, &y, n, 256, None))?;
        println!("T {t:3} gelu_mul + act_q8_256 (2048): unfused {un:7.1} us, fused {fu:7.1} us");
        let n = t * 1536;
        let (g, u, y) = (filled(n, 0.3)?, filled(n, 0.7)?, filled(n, 0.0)?);
        let un = median_us(q, || {
            ew.silu_mul(q, &g, &u, &y, n)?;
            aq.run(q, r32, &y, &y, n)
        })?;
        let fu = median_us(q, || g8.run(q, Glu::Silu, &g, &u, &y, n, 32, None))?;
        println!("T {t:3} silu_mul + act_q8_32 (1536): unfused {un:7.1} us, fused {fu:7.1} us");
        for (name, mode, nh, nkv, hd, qk) in [
            ("gemma3", RopeMode::Neox, 4usize, 1usize, 256usize, true),
            ("smollm2", RopeMode::Norm, 9, 3, 64, false),
        ] {
            let pd = q.upload(&(0..t as i32).map(|i| 500 + i).collect::<Vec<_>>())?;
            let table = RopeTable::new(q, 1e6, hd)?;
            let qr = filled(t * nh * hd, 0.5)?;
            let (k, v) = (filled(t * nkv * hd, 0.25)?, filled(t * nkv * hd, 0.75)?);
            let zeros = vec![f16::ZERO; nkv * n_ctx * hd];
            let (kc, vc) = (q.upload(&zeros)?, q.upload(&zeros)?);
            let nw = filled(hd, 1.0)?;
            let un = median_us(q, || {
                if qk {
                    norm.rms_norm(q, &qr, &nw, &qr, t * nh, hd, 1e-6)?;
                    norm.rms_norm(q, &k, &nw, &k, t * nkv, hd, 1e-6)?;
                }
                rope.run(q, mode, &qr, &pd, &table, t, nh, hd)?;
                rope.run(q, mode, &k, &pd, &table, t, nkv, hd)?;
                kv.run(q, &k, &v, &kc, &vc, &pd, t, nkv, hd, n_ctx)
            })?;
            let norms = QkNorm {
                q_w: &nw,
                k_w: &nw,
                eps: 1e-6,
            };
            let shape = RopeKvShape {
                t,
                n_head: nh,
                n_kv_head: nkv,
                head_dim: hd,
                n_ctx,
            };
            let fu = median_us(q, || {
                let nq = qk.then_some(&norms);
                rkv.run(q, mode, nq, &qr, &k, &v, &kc, &vc, &pd, &table, shape)
            })?;
            println!("T {t:3} [qk norms +] rope q, k + kv_store ({name}): unfused {un:7.1} us, fused {fu:7.1} us");
        }
    }
    fold(ctx, q)
}

/// The norm folded into a projection (`mmvq_residual_norm`) against the projection with its
/// residual then `rms_norm_q8_32` (two launches), at SmolLM2's o (576, 576) and down (576, 1536)
/// Q4_1, as a decode step runs them: 30 layers' distinct weights back to back, one wait.
fn fold(ctx: &Context, q: &Queue) -> Result<()> {
    use rand::{Rng, SeedableRng};
    use strata::kernels::{MatrixKernels, NormTail, QuantMatrix, XStage};
    let (mk, nq8, aq) = (MatrixKernels::new(ctx), NormQ8::new(ctx)?, ActQ::new(ctx)?);
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let counter = q.upload(&[0u32])?;
    for (name, n_out, n_in) in [("o", 576usize, 576usize), ("down", 576, 1536)] {
        let ws: Vec<QuantMatrix> = (0..30)
            .map(|_| {
                let v: Vec<f32> = (0..n_out * n_in).map(|_| rng.gen::<f32>() - 0.5).collect();
                let b = strata::quant::quantize_by_type(strata::quant::type_id::Q4_1, &v)
                    .expect("quantize");
                QuantMatrix::upload(q, name, strata::quant::type_id::Q4_1, n_out, n_in, &b)
            })
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| strata::sycl::SyclError::invalid("bench", e.to_string()))?;
        let nw = q.upload(&vec![1.0f32; n_out])?;
        for t in [1usize, 5] {
            let x: Vec<f32> = (0..t * n_in).map(|_| rng.gen::<f32>() - 0.5).collect();
            let xd = q.upload(&x)?;
            let xq = q.alloc::<f32>(t * n_in.max(n_out))?;
            let stb = q.alloc::<f32>(XStage::floats(t * n_in.max(n_out)))?;
            let mut y = q.upload(&vec![0.0f32; t * n_out])?;
            let yq = q.alloc::<f32>(t * n_out)?;
            let st = XStage::new(&stb, t * n_in)?;
            let nst = XStage::new(&stb, t * n_out)?;
            aq.run_staged(q, &xd, &xq, t * n_in, st)?;
            let err = |e: strata::kernels::MatrixError| {
                strata::sycl::SyclError::invalid("bench", e.to_string())
            };
            let mut pair = Vec::new();
            let mut folded = Vec::new();
            for _ in 0..5 {
                pair.push(median_us(q, || {
                    for w in &ws {
                        mk.mmvq_residual(q, &w.view(), &xq, Some(st), &mut y, t)
                            .map_err(err)?;
                        nq8.rms_norm(q, &y, &nw, &yq, t, n_out, 1e-5, 32, Some(nst))?;
                    }
                    Ok(())
                })?);
                folded.push(median_us(q, || {
                    let tail = NormTail {
                        counter: &counter,
                        w: &nw,
                        yq: &yq,
                        st: Some(nst),
                        eps: 1e-5,
                    };
                    for w in &ws {
                        mk.mmvq_residual_norm(q, &w.view(), &xq, Some(st), &mut y, &tail, t)
                            .map_err(err)?;
                    }
                    Ok(())
                })?);
            }
            let med = |v: &mut Vec<f64>| {
                v.sort_by(|a, b| a.total_cmp(b));
                v[v.len() / 2] / 30.0
            };
            let (p, f) = (med(&mut pair), med(&mut folded));
            println!(
                "T {t} {name} Q4_1 ({n_out}, {n_in}) x 30 layers: residual + rms_norm_q8 {p:6.1} us a layer, folded {f:6.1} us ({:.2}x)",
                p / f
            );
        }
    }
    Ok(())
}
