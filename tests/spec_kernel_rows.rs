//! The multi-row guarantee for the verify-window kernels that had no T-row test of their own:
//! RoPE (both rotations), the gated activations and residual add, the 8-bit activation rounding
//! (both block sizes), the embedding fetch and the KV store. For T = 1..8 a T-row call must give
//! each row bitwise what a one-row call on that row gives. (mmvq, attention, RMSNorm and softmax
//! have theirs in tests/kernels_*.rs.)
mod kernels_common;
use half::f16;
use kernels_common::*;
use rand::Rng;
use strata::kernels::act::Elementwise;
use strata::kernels::actq::{ActQ, ActRound};
use strata::kernels::embed::{Embed, EmbedType};
use strata::kernels::kv::KvStore;
use strata::kernels::rope::{Rope, RopeMode, RopeTable};
use strata::sycl::{DeviceBuffer, Queue};

const TS: [usize; 8] = [1, 2, 3, 4, 5, 6, 7, 8];

/// A kernel call on `rows` rows of input: `(queue, input, rows) -> output`.
type RowsFn<'a> = &'a dyn Fn(&Queue, &[f32], usize) -> Vec<f32>;

/// Runs `f` on all `t` rows at once and on each row alone (rows of `width` f32), and checks
/// bitwise equality row by row. `f(queue, input, t) -> output`.
fn rows_vs_one(
    q: &Queue,
    label: &str,
    x: &[f32], // (t, width)
    width: usize,
    f: RowsFn<'_>,
) {
    let t = x.len() / width;
    let all = f(q, x, t);
    let out_w = all.len() / t;
    for r in 0..t {
        let one = f(q, &x[r * width..(r + 1) * width], 1);
        assert_bitwise(
            &format!("{label}: row {r} of T = {t}"),
            &one,
            &all[r * out_w..(r + 1) * out_w],
        );
    }
}

#[test]
fn rope_rows_are_bitwise_one_row_calls() {
    let (ctx, q) = setup();
    let k = Rope::new(&ctx).unwrap();
    let mut rng = rng("rope_rows");
    // SmolLM2 Q (9 x 64, llama pairs, base 1e5), Gemma Q (4 x 256, neox, 1e6 and 1e4)
    for (mode, base, n_head, hd) in [
        (RopeMode::Norm, 1e5, 9, 64),
        (RopeMode::Neox, 1e6, 4, 256),
        (RopeMode::Neox, 1e4, 1, 256),
    ] {
        let table = RopeTable::new(&q, base, hd).unwrap();
        for t in TS {
            let p0 = rng.gen_range(0..4000);
            let x = uniform(&mut rng, t * n_head * hd, -2.0, 2.0);
            // row r sits at position p0 + r in both the T-row and the one-row call
            let run = |q: &Queue, x: &[f32], rows: usize, first: i32| {
                let pos: Vec<i32> = (0..rows as i32).map(|i| first + i).collect();
                let (xd, pd) = (q.upload(x).unwrap(), q.upload(&pos).unwrap());
                k.run(q, mode, &xd, &pd, &table, rows, n_head, hd).unwrap();
                q.to_vec(&xd).unwrap()
            };
            let all = run(&q, &x, t, p0);
            let w = n_head * hd;
            for r in 0..t {
                let one = run(&q, &x[r * w..(r + 1) * w], 1, p0 + r as i32);
                assert_bitwise(
                    &format!("rope {mode:?} row {r} of T = {t}"),
                    &one,
                    &all[r * w..(r + 1) * w],
                );
            }
        }
        println!(
            "rope {mode:?} base {base} {n_head}x{hd}: T = 1..8 rows == one-row calls, bitwise"
        );
    }
}

#[test]
fn activation_rows_are_bitwise_one_row_calls() {
    let (ctx, q) = setup();
    let k = Elementwise::new(&ctx).unwrap();
    let mut rng = rng("act_rows");
    for n_ff in [1536, 2048] {
        for t in TS {
            let gu = uniform(&mut rng, 2 * t * n_ff, -8.0, 8.0);
            // input rows interleave (gate row, up row) so one slice carries both
            let x: Vec<f32> = (0..t)
                .flat_map(|r| gu[2 * r * n_ff..2 * (r + 1) * n_ff].to_vec())
                .collect();
            for op in ["silu_mul", "gelu_mul", "add"] {
                let f = |q: &Queue, x: &[f32], rows: usize| {
                    let (g, u): (Vec<f32>, Vec<f32>) = (
                        (0..rows)
                            .flat_map(|r| x[2 * r * n_ff..(2 * r + 1) * n_ff].to_vec())
                            .collect(),
                        (0..rows)
                            .flat_map(|r| x[(2 * r + 1) * n_ff..(2 * r + 2) * n_ff].to_vec())
                            .collect(),
                    );
                    let (gd, ud) = (q.upload(&g).unwrap(), q.upload(&u).unwrap());
                    let out: DeviceBuffer<f32> = q.alloc(rows * n_ff).unwrap();
                    match op {
                        "silu_mul" => k.silu_mul(q, &gd, &ud, &out, rows * n_ff),
                        "gelu_mul" => k.gelu_mul(q, &gd, &ud, &out, rows * n_ff),
                        _ => k.add(q, &gd, &ud, &out, rows * n_ff),
                    }
                    .unwrap();
                    q.to_vec(&out).unwrap()
                };
                rows_vs_one(&q, op, &x, 2 * n_ff, &f);
            }
        }
        println!("silu_mul, gelu_mul, add at n_ff {n_ff}: T = 1..8 rows == one-row calls, bitwise");
    }
}

#[test]
fn activation_rounding_rows_are_bitwise_one_row_calls() {
    let (ctx, q) = setup();
    let k = ActQ::new(&ctx).unwrap();
    let mut rng = rng("actq_rows");
    for (mode, n) in [
        (ActRound::Q8Block32, 576),
        (ActRound::Q8Block32, 1536),
        (ActRound::Q8Block256, 1024),
        (ActRound::Q8Block256, 2048),
    ] {
        for t in TS {
            let x = uniform(&mut rng, t * n, -4.0, 4.0);
            let f = |q: &Queue, x: &[f32], rows: usize| {
                let (xd, yd) = (q.upload(x).unwrap(), q.alloc::<f32>(rows * n).unwrap());
                k.run(q, mode, &xd, &yd, rows * n).unwrap();
                q.to_vec(&yd).unwrap()
            };
            rows_vs_one(&q, "act_q8", &x, n, &f);
        }
        println!("act_q8 {mode:?} n {n}: T = 1..8 rows == one-row calls, bitwise");
    }
}

#[test]
fn embedding_rows_are_bitwise_one_row_calls() {
    let (ctx, q) = setup();
    let k = Embed::new(&ctx).unwrap();
    let mut rng = rng("embed_rows");
    let (n_vocab, n_embd) = (1000, 640);
    // Q8_0 rows: 20 blocks of (f16 scale, 32 x i8)
    let mut w = Vec::with_capacity(n_vocab * n_embd / 32 * 34);
    for _ in 0..n_vocab * n_embd / 32 {
        w.extend_from_slice(&f16::from_f32(rng.gen_range(0.001..0.05)).to_le_bytes());
        w.extend((0..32).map(|_| rng.gen::<u8>()));
    }
    let wd = q.upload(&w).unwrap();
    for t in TS {
        let ids: Vec<i32> = (0..t).map(|_| rng.gen_range(0..n_vocab as i32)).collect();
        let run = |ids: &[i32]| {
            let (idd, out) = (
                q.upload(ids).unwrap(),
                q.alloc::<f32>(ids.len() * n_embd).unwrap(),
            );
            k.run(
                &q,
                &wd,
                EmbedType::Q8_0,
                n_vocab,
                n_embd,
                &idd,
                ids.len(),
                &out,
                25.3,
            )
            .unwrap();
            q.to_vec(&out).unwrap()
        };
        let all = run(&ids);
        for r in 0..t {
            assert_bitwise(
                &format!("embed row {r} of T = {t}"),
                &run(&ids[r..r + 1]),
                &all[r * n_embd..(r + 1) * n_embd],
            );
        }
    }
    println!("embed Q8_0 n_embd {n_embd}: T = 1..8 rows == one-row calls, bitwise");
}

#[test]
fn kv_store_rows_are_bitwise_one_row_calls() {
    let (ctx, q) = setup();
    let k = KvStore::new(&ctx).unwrap();
    let mut rng = rng("kv_rows");
    let (n_kv, hd, n_ctx) = (3, 64, 512);
    for t in TS {
        let p0 = rng.gen_range(0..n_ctx - 8) as i32;
        let (kr, vr) = (
            uniform(&mut rng, t * n_kv * hd, -3.0, 3.0),
            uniform(&mut rng, t * n_kv * hd, -3.0, 3.0),
        );
        let zero = vec![f16::ZERO; n_kv * n_ctx * hd];
        let store = |rows: &[(usize, i32)]| {
            let (kc, vc) = (q.upload(&zero).unwrap(), q.upload(&zero).unwrap());
            for &(r0, p) in rows {
                let n = if rows.len() == 1 { t } else { 1 };
                let w = n * n_kv * hd;
                let (kd, vd) = (
                    q.upload(&kr[r0 * n_kv * hd..r0 * n_kv * hd + w]).unwrap(),
                    q.upload(&vr[r0 * n_kv * hd..r0 * n_kv * hd + w]).unwrap(),
                );
                let pos: Vec<i32> = (0..n as i32).map(|i| p + i).collect();
                k.run(
                    &q,
                    &kd,
                    &vd,
                    &kc,
                    &vc,
                    &q.upload(&pos).unwrap(),
                    n,
                    n_kv,
                    hd,
                    n_ctx,
                )
                .unwrap();
            }
            let bits = |v: Vec<f16>| v.into_iter().map(|h| h.to_bits()).collect::<Vec<u16>>();
            (bits(q.to_vec(&kc).unwrap()), bits(q.to_vec(&vc).unwrap()))
        };
        let all = store(&[(0, p0)]);
        let ones: Vec<(usize, i32)> = (0..t).map(|r| (r, p0 + r as i32)).collect();
        // with t == 1 both are the same single call
        let one = if t == 1 {
            store(&[(0, p0)])
        } else {
            store(&ones)
        };
        assert!(
            all == one,
            "kv store: T = {t} rows differ from one-row calls"
        );
    }
    println!("kv store {n_kv}x{hd}: T = 1..8 rows == one-row calls, bitwise");
}
