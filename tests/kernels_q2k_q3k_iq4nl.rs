//! Device parity of Q2_K, Q3_K and IQ4_NL (their decode traits in sycl/kernels/qformats.hpp)
//! against the f64 reference `matrix_ref` (weights decoded by engine/quant, bitwise gguf-py's
//! decoder): the decode product mmvq at 1..8 columns and the prompt path's matmul, on fresh
//! random blocks (random bytes: every quant, high-bit, scale and min pattern) and weights from
//! the engine's quantizers, and on the real llama-quantize rows of tests/data/quant. Also: the
//! opt-in tiled / K-tiled / integer-dot / KREG paths decline them, ActRound follows ggml's
//! `vec_dot_type`, and a corrupted scale is seen. Prints the NMSE measured for every case.

mod support;
use rand::Rng;
use strata::kernels::actq::ActRound;
use strata::kernels::mmvq_kreg::kreg_declines;
use strata::kernels::{ktiled, matrix_ref, qmatrix, tiled, vnni, QuantMatrix};
use strata::quant::{self, type_id};
use support::matrix::{check_matmul, check_mmvq, nmse, rng, setup, values, weights, PARITY_BOUND};

/// f32 activations, weights decoded exactly: only f32 summation order is left (the bound of
/// tests/kernels_mmvq.rs and kernels_matmul.rs).
const BOUND: f64 = PARITY_BOUND;

/// (name, ggml type id, byte offsets of the block's f16 scales)
const FORMATS: &[(&str, u32, &[usize])] = &[
    ("Q2_K", type_id::Q2_K, &[80, 82]),
    ("Q3_K", type_id::Q3_K, &[108]),
    ("IQ4_NL", type_id::IQ4_NL, &[0]),
];

/// Fresh random (n_out, n_in) blocks of `tid`: random bytes, the f16 scales random finite
/// values of either sign (2^-14 .. 2^-4, so products stay in a sane range).
fn random_blocks(r: &mut rand::rngs::StdRng, tid: u32, f16_at: &[usize], n: usize) -> Vec<u8> {
    let bytes = quant::bytes_for(tid, n).unwrap();
    let (_, bb) = quant::block_info(tid).unwrap();
    let mut b: Vec<u8> = (0..bytes).map(|_| r.gen()).collect();
    for blk in b.chunks_exact_mut(bb) {
        for &at in f16_at {
            let mag = 2f32.powf(r.gen_range(-14.0..-4.0));
            let v = if r.gen() { mag } else { -mag };
            blk[at..at + 2].copy_from_slice(&half::f16::from_f32(v).to_le_bytes());
        }
    }
    b
}

/// The shapes of a format: SmolLM2's and Gemma 3's, n_out not a multiple of 4 rows; IQ4_NL
/// also at the 576 / 640 row widths llama-quantize stores it for.
fn shapes(tid: u32) -> Vec<(usize, usize)> {
    let mut s = vec![(576, 1536), (640, 2048), (37, 256), (45, 512)];
    if tid == type_id::IQ4_NL {
        s.extend([(1536, 576), (2048, 640), (19, 32)]);
    }
    s
}

#[test]
fn mmvq_matches_reference() {
    let mut r = rng(0x3131);
    let mut worst = 0f64;
    for &(name, tid, f16_at) in FORMATS {
        for (n_out, n_in) in shapes(tid) {
            let wb = random_blocks(&mut r, tid, f16_at, n_out * n_in);
            worst = worst.max(check_mmvq(name, tid, &wb, n_out, n_in, r.gen()));
        }
        // and weights from the engine's quantizer (realistic scale / quant statistics)
        let wb = weights(&mut r, tid, 96, 1024);
        worst = worst.max(check_mmvq(name, tid, &wb, 96, 1024, r.gen()));
    }
    println!("worst mmvq nmse {worst:e} (bound {BOUND:e})");
}

#[test]
fn matmul_matches_reference() {
    // mid-size T, a whole 512-row chunk, and rows longer than one decode chunk (CFG_KC = 1024)
    let cases: &[(usize, usize, usize)] = &[
        (576, 1536, 9),
        (640, 2048, 33),
        (45, 512, 512),
        (24, 4352, 20),
    ];
    let mut r = rng(0x3232);
    let mut worst = 0f64;
    for &(name, tid, f16_at) in FORMATS {
        let mut cs = cases.to_vec();
        if tid == type_id::IQ4_NL {
            cs.extend([(1536, 576, 17), (2048, 640, 40)]);
        }
        for (n_out, n_in, t) in cs {
            let wb = random_blocks(&mut r, tid, f16_at, n_out * n_in);
            worst = worst.max(check_matmul(name, tid, &wb, n_out, n_in, t));
        }
        let wb = weights(&mut r, tid, 96, 1024);
        worst = worst.max(check_matmul(name, tid, &wb, 96, 1024, 64));
    }
    println!("worst matmul nmse {worst:e} (bound {BOUND:e})");
}

#[test]
fn real_rows_of_llama_quantize_output() {
    // tests/data/quant (README.md there: the commands): 8 rows each
    let cases: &[(&str, u32, usize)] = &[
        (
            "smollm2-Q2_K_S.blk12.ffn_down.rows100-108.Q2_K.raw",
            type_id::Q2_K,
            1536,
        ),
        (
            "smollm2-Q2_K.blk12.ffn_down.rows100-108.Q3_K.raw",
            type_id::Q3_K,
            1536,
        ),
        (
            "smollm2-IQ4_NL.blk12.ffn_up.rows100-108.IQ4_NL.raw",
            type_id::IQ4_NL,
            576,
        ),
        (
            "gemma3-IQ4_NL.blk5.ffn_up.rows100-108.IQ4_NL.raw",
            type_id::IQ4_NL,
            640,
        ),
    ];
    let dir = strata::paths::project_root().join("tests/data/quant");
    for &(file, tid, n_in) in cases {
        let name = quant::type_name(tid).unwrap();
        let wb = std::fs::read(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let n_out = 8;
        assert_eq!(
            wb.len(),
            quant::bytes_for(tid, n_out * n_in).unwrap(),
            "{file}"
        );
        println!("{file}:");
        check_mmvq(name, tid, &wb, n_out, n_in, 31);
        check_matmul(name, tid, &wb, n_out, n_in, 40);
    }
}

#[test]
fn a_single_wrong_scale_is_seen() {
    // power check: one corrupted sub-block scale in row 5 must break the bound
    let (_ctx, q, k) = setup();
    let mut r = rng(78);
    let (n_out, n_in) = (64, 512);
    for &(name, tid, _) in FORMATS {
        let mut wb = weights(&mut r, tid, n_out, n_in);
        let x = values(&mut r, n_in);
        let reference = matrix_ref(tid, &wb, n_out, n_in, &x, 1).unwrap();
        let row5 = 5 * (wb.len() / n_out);
        match tid {
            type_id::Q2_K => wb[row5 + 3] ^= 0x0C, // scale of sub-block 3: 2 bits of 4
            type_id::Q3_K => wb[row5 + 96] ^= 0x0C, // low bits of sub-block 0's 6-bit scale
            _ => wb[row5 + 1] ^= 0x04,             // IQ4_NL: block 0's f16 d, exponent bit
        }
        let w = QuantMatrix::upload(&q, name, tid, n_out, n_in, &wb).unwrap();
        let xd = q.upload(&x).unwrap();
        let mut yd = q.alloc::<f32>(n_out).unwrap();
        k.mmvq(&q, &w.view(), &xd, &mut yd, 1).unwrap();
        let e = nmse(&q.to_vec(&yd).unwrap(), &reference);
        println!("mmvq {name:6} corrupted row 5: nmse vs the clean reference {e:.2e}");
        assert!(
            e > BOUND,
            "{name}: corrupting row 5 went unnoticed (nmse {e:e})"
        );
    }
}

#[test]
fn opt_in_paths_decline_and_rounding_follows_ggml() {
    let (_ctx, q, _k) = setup();
    for &(name, tid, _) in FORMATS {
        assert_eq!(qmatrix::cfg_name(tid), Some(name));
        assert!(!qmatrix::uses_grids(tid), "{name}: no lookup tables");
        assert!(
            !tiled::supported(tid) && !ktiled::supported(tid) && !vnni::supported(tid),
            "{name}"
        );
        let wb = vec![0u8; quant::bytes_for(tid, 4 * 256).unwrap()];
        assert!(
            qmatrix::repack(tid, &wb, 4, 256).is_none(),
            "{name}: no tiled copy"
        );
        let w = QuantMatrix::upload(&q, name, tid, 4, 256, &wb).unwrap();
        let why = kreg_declines(&w.view()).expect("KREG declines");
        println!("{name}: KREG declines: {why}");
    }
    // ggml-cpu.c type_traits_cpu: vec_dot_type Q8_K for Q2_K/Q3_K, Q8_0 for IQ4_NL
    assert_eq!(ActRound::for_type(type_id::Q2_K), ActRound::Q8Block256);
    assert_eq!(ActRound::for_type(type_id::Q3_K), ActRound::Q8Block256);
    assert_eq!(ActRound::for_type(type_id::IQ4_NL), ActRound::Q8Block32);
}
