//! Embedding parity: the SYCL row fetch vs the f64 reference, Q8_0 / F16 / F32, real model dims;
//! the Q8_0 fetch from the tied head's tiled copy bitwise the fetch from the GGUF bytes.
mod kernels_common;
use kernels_common::*;
use rand::Rng;
use strata::kernels::embed::{self, Embed, EmbedType};

fn random_tensor(
    rng: &mut rand::rngs::StdRng,
    ty: EmbedType,
    n_vocab: usize,
    n_embd: usize,
) -> Vec<u8> {
    let mut w = Vec::new();
    for _ in 0..n_vocab {
        match ty {
            EmbedType::Q8_0 | EmbedType::Q8_0Tiled => {
                for _ in 0..n_embd / 32 {
                    let d = half::f16::from_f32(rng.gen_range(0.0005f32..0.05));
                    w.extend_from_slice(&d.to_le_bytes());
                    w.extend((0..32).map(|_| rng.gen::<i8>() as u8));
                }
            }
            EmbedType::F16 => {
                for _ in 0..n_embd {
                    w.extend_from_slice(
                        &half::f16::from_f32(rng.gen_range(-2.0f32..2.0)).to_le_bytes(),
                    );
                }
            }
            EmbedType::F32 => {
                for _ in 0..n_embd {
                    w.extend_from_slice(&rng.gen_range(-2.0f32..2.0).to_le_bytes());
                }
            }
        }
    }
    w
}

#[test]
fn embed_matches_reference() {
    let (ctx, q) = setup();
    let k = Embed::new(&ctx).unwrap();
    let mut rng = rng("embed");
    // (type, n_vocab, n_embd, T, scale): SmolLM2 576 (scale 1), Gemma 640 (scale sqrt(640))
    let cases = [
        (EmbedType::Q8_0, 777, 576, 1, 1.0f32),
        (EmbedType::Q8_0, 777, 576, 8, 1.0),
        (EmbedType::Q8_0, 1000, 640, 5, (640f32).sqrt()),
        (EmbedType::F16, 300, 640, 3, (640f32).sqrt()),
        (EmbedType::F16, 300, 100, 4, 1.0), // n_embd not a multiple of 32
        (EmbedType::F32, 300, 576, 6, 0.5),
        (EmbedType::F32, 50, 33, 2, 1.0),
    ];
    for (ty, n_vocab, n_embd, t, scale) in cases {
        let w = random_tensor(&mut rng, ty, n_vocab, n_embd);
        let mut ids: Vec<i32> = (0..t).map(|_| rng.gen_range(0..n_vocab as i32)).collect();
        ids[0] = n_vocab as i32 - 1; // the last row too
        embed::check_ids(&ids, n_vocab).unwrap();
        let wd = q.upload(&w).unwrap();
        let idd = q.upload(&ids).unwrap();
        let out = q.alloc::<f32>(t * n_embd).unwrap();
        k.run(&q, &wd, ty, n_vocab, n_embd, &idd, t, &out, scale)
            .unwrap();
        let got = q.to_vec(&out).unwrap();
        let want = embed::reference(&w, ty, n_embd, &ids, scale);
        check_nmse(
            &format!("embed {ty:?} vocab {n_vocab} n_embd {n_embd} T {t}"),
            &got,
            &want,
            1e-7,
        );
    }
}

#[test]
fn embed_bad_ids_are_caught() {
    let (ctx, q) = setup();
    let k = Embed::new(&ctx).unwrap();
    let err = embed::check_ids(&[3, 10, -1], 10).unwrap_err().to_string();
    assert!(err.contains("token id 10 at index 1"), "{err}");
    // on the device an out-of-range id gives a NaN row, never a read outside the tensor
    let mut rng = rng("embed_bad_ids");
    let w = random_tensor(&mut rng, EmbedType::Q8_0, 4, 64);
    let wd = q.upload(&w).unwrap();
    let idd = q.upload(&[1i32, 4]).unwrap();
    let out = q.alloc::<f32>(2 * 64).unwrap();
    k.run(&q, &wd, EmbedType::Q8_0, 4, 64, &idd, 2, &out, 1.0)
        .unwrap();
    let got = q.to_vec(&out).unwrap();
    assert!(got[..64].iter().all(|v| v.is_finite()));
    assert!(got[64..].iter().all(|v| v.is_nan()));
    // a short weight buffer is an error naming it
    let e = k
        .run(&q, &wd, EmbedType::Q8_0, 5, 64, &idd, 2, &out, 1.0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("token_embd"), "{e}");
}

#[test]
fn embed_from_the_tiled_copy_is_bitwise_the_gguf_read() {
    let (ctx, q) = setup();
    let k = Embed::new(&ctx).unwrap();
    let mut rng = rng("embed_tiled");
    // n_vocab not a multiple of 16 (a padded last tile), every row of the last tile fetched
    for (n_vocab, n_embd, scale) in [(1001usize, 640usize, (640f32).sqrt()), (77, 576, 1.0)] {
        let w = random_tensor(&mut rng, EmbedType::Q8_0, n_vocab, n_embd);
        let tiled = strata::kernels::repack(strata::quant::type_id::Q8_0, &w, n_vocab, n_embd)
            .expect("Q8_0 has a tiled form");
        let mut ids: Vec<i32> = (0..40).map(|_| rng.gen_range(0..n_vocab as i32)).collect();
        ids.extend((n_vocab / 16 * 16..n_vocab).map(|i| i as i32));
        let t = ids.len();
        let idd = q.upload(&ids).unwrap();
        let run = |bytes: &[u8], ty: EmbedType| {
            let wd = q.upload(bytes).unwrap();
            let out = q.alloc::<f32>(t * n_embd).unwrap();
            k.run(&q, &wd, ty, n_vocab, n_embd, &idd, t, &out, scale)
                .unwrap();
            q.to_vec(&out).unwrap()
        };
        let (a, b) = (run(&w, EmbedType::Q8_0), run(&tiled, EmbedType::Q8_0Tiled));
        let differ = a
            .iter()
            .zip(&b)
            .filter(|(x, y)| x.to_bits() != y.to_bits())
            .count();
        println!("embed tiled vs GGUF, vocab {n_vocab} n_embd {n_embd}: {t} rows, {differ} of {} values differ", a.len());
        assert_eq!(differ, 0);
        check_nmse(
            "embed Q8_0Tiled",
            &b,
            &embed::reference(&w, EmbedType::Q8_0, n_embd, &ids, scale),
            1e-7,
        );
        // the GGUF-sized buffer is too short for the tiled table: an error naming it
        let short = q.upload(&w[..w.len() - 34]).unwrap();
        let out = q.alloc::<f32>(t * n_embd).unwrap();
        let e = k
            .run(
                &q,
                &short,
                EmbedType::Q8_0Tiled,
                n_vocab,
                n_embd,
                &idd,
                t,
                &out,
                scale,
            )
            .unwrap_err()
            .to_string();
        assert!(e.contains("token_embd"), "{e}");
    }
}
