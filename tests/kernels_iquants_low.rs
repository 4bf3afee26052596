//! Device parity of the lowest-bit i-quants IQ2_S, IQ1_S and IQ1_M (qformats_iq.hpp, through
//! the grid tables of engine/quant/grids.rs) against the f64 reference `matrix_ref` (weights
//! decoded by engine/quant, bitwise gguf-py's decoder): the decode product mmvq at 1..8 columns
//! and the prompt path's matmul, on fresh random blocks and activations, and on the real rows of
//! tests/data/quant. Prints the NMSE measured for every case.

mod support;
use rand::Rng;
use strata::kernels::{matrix_ref, QuantMatrix};
use strata::quant::{grids, type_id};
use support::matrix::{check_matmul, check_mmvq, nmse, rng, setup, values, PARITY_BOUND};

/// f32 activations, weights decoded exactly: only f32 summation order is left (the bound of
/// tests/kernels_mmvq.rs and kernels_matmul.rs).
const BOUND: f64 = PARITY_BOUND;

const FORMATS: &[(&str, u32)] = &[
    ("IQ2_S", type_id::IQ2_S),
    ("IQ1_S", type_id::IQ1_S),
    ("IQ1_M", type_id::IQ1_M),
];

/// Fresh random (n_out, n_in) blocks of `tid` (every grid index, sign and scale pattern), with
/// sane f16 scales. The engine does not quantize into these formats, so no quantizer is used.
fn random_weights(r: &mut rand::rngs::StdRng, tid: u32, n_out: usize, n_in: usize) -> Vec<u8> {
    let n = n_out * n_in / 256;
    match tid {
        type_id::IQ2_S => grids::random_blocks(r, n, 82, 0),
        type_id::IQ1_S => grids::random_blocks(r, n, 50, 0),
        type_id::IQ1_M => {
            // the f16 d is the top nibbles of the four u16 scale words (bytes 48..56): draw it
            // as random_blocks draws d, at a scratch spot, then spread it there
            let mut b = grids::random_blocks(r, n, 56, 0);
            for blk in b.chunks_exact_mut(56) {
                let e: u16 = r.gen_range(1..=11);
                let d = (r.gen::<u16>() & 0x83ff) | (e << 10);
                for k in 0..4 {
                    let at = 48 + 2 * k;
                    let w = u16::from_le_bytes([blk[at], blk[at + 1]]) & 0x0FFF;
                    let w = w | ((d >> (4 * k)) & 0xF) << 12;
                    blk[at..at + 2].copy_from_slice(&w.to_le_bytes());
                }
            }
            b
        }
        _ => unreachable!("not one of this file's formats"),
    }
}

#[test]
fn mmvq_matches_reference_on_random_blocks() {
    // SmolLM2's ffn_down (n_in 1536), Gemma 3's (2048), n_out not a multiple of 4 rows
    let shapes: &[(usize, usize)] = &[(576, 1536), (640, 2048), (37, 256), (45, 512)];
    let mut r = rng(0x1b1b);
    let mut worst = 0f64;
    for &(name, tid) in FORMATS {
        for &(n_out, n_in) in shapes {
            let wb = random_weights(&mut r, tid, n_out, n_in);
            worst = worst.max(check_mmvq(name, tid, &wb, n_out, n_in, r.gen()));
        }
    }
    println!("worst mmvq nmse {worst:e} (bound {BOUND:e})");
}

#[test]
fn matmul_matches_reference_on_random_blocks() {
    // mid-size T, a whole 512-row chunk, and rows longer than one decode chunk (CFG_KC = 1024)
    let cases: &[(usize, usize, usize)] = &[
        (576, 1536, 9),
        (640, 2048, 33),
        (45, 512, 512),
        (24, 4352, 20),
    ];
    let mut r = rng(0x2c2c);
    let mut worst = 0f64;
    for &(name, tid) in FORMATS {
        for &(n_out, n_in, t) in cases {
            let wb = random_weights(&mut r, tid, n_out, n_in);
            worst = worst.max(check_matmul(name, tid, &wb, n_out, n_in, t));
        }
    }
    println!("worst matmul nmse {worst:e} (bound {BOUND:e})");
}

#[test]
fn real_rows_of_llama_quantize_output() {
    // the excerpts of tests/data/quant (8 rows of SmolLM2's blk.12.ffn_down, n_in 1536)
    let dir = strata::paths::project_root().join("tests/data/quant");
    for &(name, tid) in FORMATS {
        let file = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().ends_with(&format!(".{name}.raw")))
            .unwrap_or_else(|| panic!("tests/data/quant: no {name} excerpt"));
        let wb = std::fs::read(&file).unwrap();
        let (n_out, n_in) = (8, 1536);
        assert_eq!(
            wb.len(),
            strata::quant::bytes_for(tid, n_out * n_in).unwrap()
        );
        check_mmvq(name, tid, &wb, n_out, n_in, 31);
        check_matmul(name, tid, &wb, n_out, n_in, 40);
    }
}

#[test]
fn a_single_wrong_scale_is_seen() {
    // power check: one corrupted super-block scale in row 5 must break the bound
    let (_ctx, q, k) = setup();
    let mut r = rng(77);
    let (n_out, n_in) = (64, 512);
    for &(name, tid) in FORMATS {
        let mut wb = random_weights(&mut r, tid, n_out, n_in);
        let x = values(&mut r, n_in);
        let reference = matrix_ref(tid, &wb, n_out, n_in, &x, 1).unwrap();
        let row5 = 5 * (wb.len() / n_out);
        if tid == type_id::IQ1_M {
            // d's bits 12..16 are the last scale word's top nibble: flip exponent bit 2
            wb[row5 + 55] ^= 0x10;
        } else {
            wb[row5 + 1] ^= 0x14;
        }
        let w = QuantMatrix::upload(&q, name, tid, n_out, n_in, &wb).unwrap();
        let xd = q.upload(&x).unwrap();
        let mut yd = q.alloc::<f32>(n_out).unwrap();
        k.mmvq(&q, &w.view(), &xd, &mut yd, 1).unwrap();
        let e = nmse(&q.to_vec(&yd).unwrap(), &reference);
        println!("mmvq {name:5} corrupted row 5: nmse vs the clean reference {e:.2e}");
        assert!(
            e > BOUND,
            "{name}: corrupting row 5 went unnoticed (nmse {e:e})"
        );
    }
}
