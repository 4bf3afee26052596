//! Device parity of the grid i-quants (IQ2_XXS, IQ2_XS, IQ3_XXS, IQ3_S: sycl/kernels/
//! qformats_iq.hpp, built with the tables of engine/quant/grids.rs by `mmvq_grids` /
//! `matmul_grids`) against the f64 reference (`matrix_ref`: engine/quant's dequantizer, bitwise
//! gguf-py's, then f64 products), for decode (mmvq, T = 1..8) and the prompt (matmul, T > 8),
//! on fresh random blocks (every bit pattern with a sane f16 scale is a valid block). Also: the
//! opt-in tiled / K-tiled / integer-dot / KREG paths decline them, and the default formats'
//! kernel sources do not carry the tables.

mod support;
use strata::kernels::mmvq_kreg::kreg_declines;
use strata::kernels::{ktiled, matrix_ref, qmatrix, tiled, vnni, QuantMatrix};
use strata::quant::{self, grids, type_id};
use strata::sycl::kernels;
use support::matrix::*;

/// The formats under test: (name, ggml type id, f16 scale offset in the block).
const IQ: &[(&str, u32)] = &[
    ("IQ2_XXS", type_id::IQ2_XXS),
    ("IQ2_XS", type_id::IQ2_XS),
    ("IQ3_XXS", type_id::IQ3_XXS),
    ("IQ3_S", type_id::IQ3_S),
];

/// f32 activations, f32 weights decoded exactly: only the f32 summation order differs from
/// the f64 reference (the bound of tests/kernels_mmvq.rs and kernels_matmul.rs).
const BOUND: f64 = 1e-7;

/// (n_out, n_in) random blocks of `tid` (d at byte 0 in all four formats).
fn iq_weights(rng: &mut rand::rngs::StdRng, tid: u32, n_out: usize, n_in: usize) -> Vec<u8> {
    let (elems, bytes) = quant::block_info(tid).unwrap();
    grids::random_blocks(rng, n_out * n_in / elems, bytes, 0)
}

#[test]
fn mmvq_matches_reference_and_rows_are_bitwise_independent_of_t() {
    let (_ctx, q, k) = setup();
    let mut rng = rng(0x1a_0331);
    let shapes: &[(usize, usize)] = &[(576, 1536), (1536, 512), (640, 2048), (45, 512), (37, 256)];
    let mut worst = 0f64;
    for &(name, tid) in IQ {
        for &(n_out, n_in) in shapes {
            let wb = iq_weights(&mut rng, tid, n_out, n_in);
            let w = QuantMatrix::upload(&q, name, tid, n_out, n_in, &wb).unwrap();
            assert!(
                w.tiled.is_none() && w.buf.is_some(),
                "{name}: GGUF bytes only"
            );
            let x = values(&mut rng, 8 * n_in);
            worst = worst.max(mmvq_parity(&q, &k, name, &w, &wb, &x, BOUND));
        }
    }
    println!("mmvq i-quants: worst nmse {worst:e} (bound {BOUND:e})");
}

#[test]
fn matmul_matches_reference_and_mmvq() {
    let (_ctx, q, k) = setup();
    let mut rng = rng(0x1a_0332);
    // mid-size T, the 512-row chunk, and n_in past one CFG_KC = 1024 chunk (17 blocks)
    let cases: &[(usize, usize, usize)] = &[
        (1536, 512, 9),
        (576, 1536, 32),
        (45, 512, 512),
        (24, 4352, 20),
    ];
    let mut worst = 0f64;
    for &(name, tid) in IQ {
        for &(n_out, n_in, t) in cases {
            let wb = iq_weights(&mut rng, tid, n_out, n_in);
            let w = QuantMatrix::upload(&q, name, tid, n_out, n_in, &wb).unwrap();
            let x = values(&mut rng, t * n_in);
            let xd = q.upload(&x).unwrap();
            let mut yd = q.alloc::<f32>(t * n_out).unwrap();
            k.matmul(&q, &w.view(), &xd, &mut yd, t).unwrap();
            let y = q.to_vec(&yd).unwrap();
            let reference = matrix_ref(tid, &wb, n_out, n_in, &x, t).unwrap();
            let e = nmse(&y, &reference);
            worst = worst.max(e);
            println!("matmul {name:7} ({n_out:4}, {n_in:4}) T={t:3}: nmse {e:.2e}");
            assert!(e < BOUND, "{name} ({n_out}, {n_in}) T={t}: nmse {e:e}");
            // the first 8 rows through mmvq: the same decode, another summation order
            let mut y8 = q.alloc::<f32>(8 * n_out).unwrap();
            k.mmvq(&q, &w.view(), &xd, &mut y8, 8).unwrap();
            let y8: Vec<f64> = q.to_vec(&y8).unwrap().iter().map(|&v| v as f64).collect();
            let e8 = nmse(&y[..8 * n_out], &y8);
            assert!(e8 < BOUND, "{name}: matmul rows vs mmvq rows nmse {e8:e}");
        }
    }
    println!("matmul i-quants: worst nmse {worst:e} (bound {BOUND:e})");
}

#[test]
fn a_single_wrong_scale_or_grid_index_is_seen() {
    // Power check: the bound must catch one corrupted block scale, and one changed grid index.
    let (_ctx, q, k) = setup();
    let mut rng = rng(0x1a_0333);
    let (n_out, n_in) = (64, 512);
    for &(name, tid) in IQ {
        let mut clean = iq_weights(&mut rng, tid, n_out, n_in);
        // one scale for every block (2^-7), so the corrupted block weighs as much as any other
        let bb = quant::block_info(tid).unwrap().1;
        for blk in clean.chunks_exact_mut(bb) {
            blk[..2].copy_from_slice(&0x2000u16.to_le_bytes());
        }
        let x = values(&mut rng, 9 * n_in);
        let reference = matrix_ref(tid, &clean, n_out, n_in, &x, 9).unwrap();
        let row5 = 5 * (clean.len() / n_out);
        // byte 2: the first grid index (low byte of a u16 index for IQ2_XS)
        for (what, at, flip) in [
            ("scale d", row5 + 1, 0x11u8),
            ("grid index", row5 + 2, 0x5a),
        ] {
            let mut wb = clean.clone();
            wb[at] ^= flip;
            let w = QuantMatrix::upload(&q, name, tid, n_out, n_in, &wb).unwrap();
            let xd = q.upload(&x).unwrap();
            let mut yd = q.alloc::<f32>(9 * n_out).unwrap();
            k.mmvq(&q, &w.view(), &xd, &mut yd, 1).unwrap();
            let e1 = nmse(&q.to_vec(&yd).unwrap()[..n_out], &reference[..n_out]);
            k.matmul(&q, &w.view(), &xd, &mut yd, 9).unwrap();
            let e9 = nmse(&q.to_vec(&yd).unwrap(), &reference);
            println!("{name:7} corrupted {what} of row 5: nmse mmvq {e1:.2e}, matmul {e9:.2e}");
            assert!(
                e1 > BOUND && e9 > BOUND,
                "{name}: corrupted {what} went unnoticed"
            );
        }
    }
}

#[test]
fn opt_in_paths_decline_and_default_sources_do_not_change() {
    let (_ctx, q, _k) = setup();
    for &(name, tid) in IQ {
        assert!(qmatrix::uses_grids(tid), "{name}");
        assert!(
            !tiled::supported(tid) && !ktiled::supported(tid) && !vnni::supported(tid),
            "{name}"
        );
        assert!(
            qmatrix::repack(tid, &[], 0, 256).is_none(),
            "{name}: no tiled copy"
        );
        let wb = vec![0u8; quant::bytes_for(tid, 4 * 256).unwrap()];
        let w = QuantMatrix::upload(&q, name, tid, 4, 256, &wb).unwrap();
        let why = kreg_declines(&w.view()).expect("KREG declines the i-quants");
        println!("{name}: KREG declines: {why}");
        assert_eq!(
            quant::quantize_by_type(tid, &[0.0; 256]),
            Err(quant::QuantError::NoQuantizer { format: name })
        );
    }
    for t in [type_id::Q8_0, type_id::Q4_K, type_id::IQ4_XS, type_id::F16] {
        assert!(!qmatrix::uses_grids(t));
    }
    // the default sources never see the tables; the grid sources carry all of them
    for src in [&kernels::MMVQ, &kernels::MATMUL] {
        assert!(
            !src.text.contains("iq2xxs_grid") && !src.text.contains("KQ_GRIDS"),
            "{}",
            src.name
        );
        assert!(src
            .text
            .starts_with(include_str!("../sycl/kernels/qformats.hpp")));
    }
    for src in [kernels::mmvq_grids(), kernels::matmul_grids()] {
        assert!(src.text.starts_with(&grids::c_tables()), "{}", src.name);
        assert!(src
            .text
            .contains(include_str!("../sycl/kernels/qformats_iq.hpp")));
        assert!(!src
            .text
            .contains(include_str!("../sycl/kernels/qformats.hpp")));
    }
}

#[test]
fn real_llama_quantize_rows_match_reference() {
    // the excerpts of tests/data/quant: 8 rows of SmolLM2's blk.12.ffn_down (n_in 1536) as
    // llama-quantize --imatrix wrote them (tests/data/quant/README.md)
    let (_ctx, q, k) = setup();
    let mut rng = rng(0x1a_0334);
    let dir = strata::paths::project_root().join("tests/data/quant");
    let (n_out, n_in) = (8, 1536);
    for &(name, tid) in IQ {
        let path = dir.join(format!(
            "smollm2-{name}.blk12.ffn_down.rows100-108.{name}.raw"
        ));
        let wb = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(
            wb.len(),
            quant::bytes_for(tid, n_out * n_in).unwrap(),
            "{name}"
        );
        let w = QuantMatrix::upload(&q, name, tid, n_out, n_in, &wb).unwrap();
        let t = 24;
        let x = values(&mut rng, t * n_in);
        let xd = q.upload(&x).unwrap();
        let reference = matrix_ref(tid, &wb, n_out, n_in, &x, t).unwrap();
        let mut yd = q.alloc::<f32>(t * n_out).unwrap();
        let mut line = format!("real {name:7} (8, 1536) mmvq nmse T=1..8:");
        for tt in 1..=8 {
            k.mmvq(&q, &w.view(), &xd, &mut yd, tt).unwrap();
            let e = nmse(
                &q.to_vec(&yd).unwrap()[..tt * n_out],
                &reference[..tt * n_out],
            );
            line += &format!(" {e:.1e}");
            assert!(e < BOUND, "{name} real rows mmvq T={tt}: nmse {e:e}");
        }
        k.matmul(&q, &w.view(), &xd, &mut yd, t).unwrap();
        let e = nmse(&q.to_vec(&yd).unwrap(), &reference);
        println!("{line}; matmul T={t}: {e:.1e}");
        assert!(e < BOUND, "{name} real rows matmul: nmse {e:e}");
    }
}
