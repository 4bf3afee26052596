//! Parity of the prompt-path matmul kernel (T > 8) against the f64 reference for every format,
//! and its rows against mmvq's (to rounding: another summation order, not bitwise).

mod support;
use strata::kernels::{matrix_ref, GgufBytes, QuantMatrix};
use support::matrix::*;

const BOUND: f64 = 1e-7; // f32 activations: only summation order differs from the f64 reference

#[test]
fn matmul_matches_reference() {
    let (_ctx, q, k) = setup();
    let mut rng = rng(0x6d6d);
    // (n_out, n_in, T): the real shapes at mid-size T, small shapes at the 512-row chunk,
    // and rows longer than one decode chunk
    let cases: &[(usize, usize, usize)] = &[
        (1536, 576, 9),
        (576, 1536, 32),
        (2048, 640, 100),
        (640, 2048, 17),
        (45, 512, 512),
        (37, 96, 512),
        (24, 4352, 20), // n_in > CFG_KC = 1024: five chunks, sums parked in y between them
    ];
    for &(name, tid) in FORMATS {
        for &(n_out, n_in, t) in cases {
            if !fits(tid, n_in) {
                continue;
            }
            let p = product(&mut rng, &q, name, tid, n_out, n_in, t);
            let y = run_matmul(&k, &q, &p, t);
            let reference = matrix_ref(tid, &p.wb, n_out, n_in, &p.x, t).unwrap();
            let e = nmse(&y, &reference);
            println!("matmul {name:6} ({n_out:4}, {n_in:4}) T={t:3}: nmse {e:.2e}");
            assert!(e < BOUND, "{name} ({n_out}, {n_in}) T={t}: nmse {e:e}");
        }
    }
}

#[test]
fn matmul_rows_match_mmvq_rows() {
    let (_ctx, q, k) = setup();
    let mut rng = rng(99);
    let (n_out, n_in, t) = (640, 1024, 24);
    for &(name, tid) in FORMATS {
        let p = product(&mut rng, &q, name, tid, n_out, n_in, t);
        let y = run_matmul(&k, &q, &p, t);
        // mmvq over 8-row chunks of the same activations
        let mut yv = Vec::new();
        for c in 0..t / 8 {
            let xc = q.upload(&p.x[c * 8 * n_in..(c + 1) * 8 * n_in]).unwrap();
            let mut yc = q.alloc::<f32>(8 * n_out).unwrap();
            k.mmvq(&q, &p.w.view(), &xc, &mut yc, 8).unwrap();
            yv.extend(q.to_vec(&yc).unwrap());
        }
        let yv64: Vec<f64> = yv.iter().map(|&v| v as f64).collect();
        let e = nmse(&y, &yv64);
        let identical = y.len() - bits_differ(&y, &yv);
        println!(
            "matmul vs mmvq {name:6}: nmse {e:.2e}, {identical}/{} values bitwise equal",
            y.len()
        );
        assert!(
            e < BOUND,
            "{name}: matmul rows differ from mmvq rows (nmse {e:e})"
        );
    }
}

#[test]
fn mul_dispatches_by_t() {
    // mul() must be mmvq (bitwise) at t <= 8 and matmul above.
    let (_ctx, q, k) = setup();
    let mut rng = rng(5);
    let tid = strata::quant::type_id::Q8_0;
    let (n_out, n_in) = (96, 256);
    let wb = weights(&mut rng, tid, n_out, n_in);
    let w = QuantMatrix::upload(&q, "Q8_0", tid, n_out, n_in, &wb).unwrap();
    for t in [8usize, 9] {
        let x = values(&mut rng, t * n_in);
        let xd = q.upload(&x).unwrap();
        let mut a = q.alloc::<f32>(t * n_out).unwrap();
        let mut b = q.alloc::<f32>(t * n_out).unwrap();
        k.mul(&q, &w.view(), &xd, &mut a, t).unwrap();
        if t <= 8 {
            k.mmvq(&q, &w.view(), &xd, &mut b, t).unwrap();
        } else {
            k.matmul(&q, &w.view(), &xd, &mut b, t).unwrap();
        }
        assert_eq!(q.to_vec(&a).unwrap(), q.to_vec(&b).unwrap(), "t={t}");
    }
}

#[test]
fn row_offsets_and_weight_offsets_address_the_right_data() {
    // mul_at on rows of a bigger activation buffer, into rows of a bigger output, with the weight
    // a tensor at a byte offset inside a larger upload: bitwise the plain call on copies.
    use strata::kernels::WeightView;
    let (_ctx, q, k) = setup();
    let mut rng = rng(11);
    let tid = strata::quant::type_id::Q4_K;
    let (n_out, n_in) = (40, 512);
    let wa = weights(&mut rng, tid, n_out, n_in);
    let wb = weights(&mut rng, tid, n_out, n_in);
    let both = q.upload(&[wa.clone(), wb.clone()].concat()).unwrap();
    let second = WeightView {
        buf: Some(&both),
        offset: wa.len(),
        type_id: tid,
        n_out,
        n_in,
        tiled: None,
        matmul_reads_gguf: true,
    };
    let alone = QuantMatrix::upload(&q, "b", tid, n_out, n_in, &wb).unwrap();
    for (t, x_row0, y_row0) in [(2usize, 3usize, 1usize), (9, 2, 4)] {
        let x = values(&mut rng, (x_row0 + t + 1) * n_in);
        let xd = q.upload(&x).unwrap();
        let mut yd = q.alloc::<f32>((y_row0 + t) * n_out).unwrap();
        k.mul_at(&q, &second, &xd, x_row0, &mut yd, y_row0, t)
            .unwrap();
        let got = q.to_vec(&yd).unwrap()[y_row0 * n_out..].to_vec();
        let xs = q.upload(&x[x_row0 * n_in..(x_row0 + t) * n_in]).unwrap();
        let mut ys = q.alloc::<f32>(t * n_out).unwrap();
        // the GGUF layout on both sides (upload also makes a K-tiled copy, another kernel for
        // t <= 8 with another summation order; it has no byte offset to test)
        let mut plain = alone.view();
        plain.tiled = None;
        k.mul(&q, &plain, &xs, &mut ys, t).unwrap();
        assert_eq!(
            got,
            q.to_vec(&ys).unwrap(),
            "t={t} x_row0={x_row0} y_row0={y_row0}"
        );
        let e = k.mul_at(&q, &second, &xd, x_row0 + 2, &mut yd, y_row0, t);
        assert!(e.is_err(), "reading past x must be refused");
    }
}

#[test]
fn matmul_tiles_agree_bitwise() {
    // The register tile (engine/kernels/matmul_tile.rs) is picked per device: both must give the
    // same bits, so a model's prompt logits never depend on the CPU's vector width. Both tiles
    // run here whatever this device would pick; odd n_out and T leave partial work-groups and
    // token sweeps in both, and n_in > CFG_KC parks sums in y between chunks.
    use strata::kernels::{MatmulTile, MatrixKernels};
    let (ctx, q, _k) = setup();
    let wide = MatrixKernels::with_matmul_tile(&ctx, MatmulTile::WIDE);
    let narrow = MatrixKernels::with_matmul_tile(&ctx, MatmulTile::NARROW);
    let mut rng = rng(0x7117);
    let cases: &[(usize, usize, usize)] = &[(1536, 576, 9), (45, 512, 37), (24, 2304, 13)];
    for &(name, tid) in FORMATS {
        for &(n_out, n_in, t) in cases {
            if !fits(tid, n_in) {
                continue;
            }
            let p = product(&mut rng, &q, name, tid, n_out, n_in, t);
            let a = run_matmul(&wide, &q, &p, t);
            let b = run_matmul(&narrow, &q, &p, t);
            let differ = bits_differ(&a, &b);
            println!(
                "matmul {name:6} ({n_out:4}, {n_in:4}) T={t:2}: tiles {} vs {}: {differ} of {} values differ",
                MatmulTile::WIDE.label(),
                MatmulTile::NARROW.label(),
                a.len()
            );
            assert_eq!(
                differ, 0,
                "{name} ({n_out}, {n_in}) T={t}: the tiles disagree"
            );
        }
    }
}

#[test]
fn matmul_on_the_tiled_copy_is_bitwise_the_gguf_read() {
    // The engine keeps only the tiled copy of the formats that have one (model/weights.rs):
    // matmul then decodes it lane = row (sycl/kernels/untile.hpp) with decode()'s integers and
    // float expressions, so it must give the bits of the GGUF read, with both register tiles. Odd
    // n_out leaves a padded tile and a partial work-group; n_in > CFG_KC = 1024 decodes a row
    // chunk by chunk.
    use strata::kernels::{repacked_bytes, MatmulTile, MatrixKernels};
    let (ctx, q, _k) = setup();
    let tiles = [MatmulTile::WIDE, MatmulTile::NARROW];
    let kernels: Vec<MatrixKernels> = tiles
        .iter()
        .map(|&t| MatrixKernels::with_matmul_tile(&ctx, t))
        .collect();
    let mut rng = rng(0x7173);
    let cases: &[(usize, usize, usize)] = &[(1536, 576, 9), (45, 2304, 37), (17, 1280, 20)];
    let mut tested = 0;
    for &(name, tid) in FORMATS {
        for &(n_out, n_in, t) in cases {
            if !fits(tid, n_in) || repacked_bytes(tid, n_out, n_in).is_none() {
                continue;
            }
            let p = product(&mut rng, &q, name, tid, n_out, n_in, t);
            let only = QuantMatrix::upload_for(&q, name, tid, n_out, n_in, &p.wb, GgufBytes::Drop)
                .unwrap();
            assert!(
                only.buf.is_none() && only.tiled.is_some(),
                "{name}: tiled only"
            );
            assert!(
                only.device_bytes() < p.w.device_bytes(),
                "{name}: less memory"
            );
            for (k, tile) in kernels.iter().zip(tiles) {
                let a = run_matmul(k, &q, &p, t);
                let mut y = q.alloc::<f32>(t * n_out).unwrap();
                k.matmul(&q, &only.view(), &p.xd, &mut y, t).unwrap();
                let b = q.to_vec(&y).unwrap();
                let differ = bits_differ(&a, &b);
                println!(
                    "matmul {name:6} ({n_out:4}, {n_in:4}) T={t:2} tile {}: tiled copy vs GGUF: {differ} of {} values differ",
                    tile.label(),
                    a.len()
                );
                assert_eq!(differ, 0, "{name} ({n_out}, {n_in}) T={t}");
                // and against the f64 reference (a misread zero byte could hide in both)
                let reference = matrix_ref(tid, &p.wb, n_out, n_in, &p.x, t).unwrap();
                assert!(nmse(&b, &reference) < BOUND, "{name}: reference");
            }
            tested += 1;
        }
    }
    assert!(
        tested >= 8 * 2,
        "every tiled format at two shapes or more: {tested}"
    );
    // a kernel that reads only GGUF bytes refuses the tiled-only matrix, naming why
    let tid = strata::quant::type_id::Q4_K;
    let wb = weights(&mut rng, tid, 32, 256);
    let only = QuantMatrix::upload_for(
        &q,
        "blk.0.attn_q.weight",
        tid,
        32,
        256,
        &wb,
        GgufBytes::Drop,
    )
    .unwrap();
    let e = only.view().gguf("mmvq").unwrap_err().to_string();
    assert!(
        e.contains("only the tiled copy") && e.contains("Q4_K"),
        "{e}"
    );
}

#[test]
fn gguf_bytes_kept_for_kreg_leave_the_prompt_on_the_tiled_copy() {
    // GgufBytes::Keep (STRATA_MMVQ_KREG=1's load): the bytes are there for the kernels that
    // read only them, but matmul reads the tiled copy (Read: the GGUF bytes; the same bits)
    let (_ctx, q, k) = setup();
    let mut rng = rng(0x6b65);
    let (tid, n_out, n_in, t) = (strata::quant::type_id::Q4_K, 45, 512, 12);
    let p = product(&mut rng, &q, "Q4_K", tid, n_out, n_in, t);
    let layouts = [GgufBytes::Drop, GgufBytes::Keep, GgufBytes::Read].map(|g| {
        let m = QuantMatrix::upload_for(&q, "Q4_K", tid, n_out, n_in, &p.wb, g).unwrap();
        (
            m.buf.is_some(),
            m.tiled.is_some(),
            m.view().matmul_reads_gguf,
        )
    });
    assert_eq!(
        layouts,
        [
            (false, true, false),
            (true, true, false),
            (true, true, true)
        ]
    );
    let mut outs = Vec::new();
    for g in [GgufBytes::Keep, GgufBytes::Read] {
        let m = QuantMatrix::upload_for(&q, "Q4_K", tid, n_out, n_in, &p.wb, g).unwrap();
        let mut y = q.alloc::<f32>(t * n_out).unwrap();
        k.matmul(&q, &m.view(), &p.xd, &mut y, t).unwrap();
        outs.push(q.to_vec(&y).unwrap());
    }
    assert_eq!(
        bits_differ(&outs[0], &outs[1]),
        0,
        "tiled and GGUF readers, the same bits"
    );
}
