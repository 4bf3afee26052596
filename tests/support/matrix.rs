//! Shared by the matrix-kernel parity tests: device setup, random weights per format, NMSE.

use rand::{rngs::StdRng, Rng, SeedableRng};
use strata::kernels::{matrix_ref, MatrixKernels, QuantMatrix};
use strata::quant::{self, type_id};
use strata::sycl::{self, Context, DeviceBuffer, Queue};

/// Every format the matrix kernels take, with its ggml type id.
pub const FORMATS: &[(&str, u32)] = &[
    ("F32", type_id::F32),
    ("F16", type_id::F16),
    ("BF16", type_id::BF16),
    ("Q4_0", type_id::Q4_0),
    ("Q4_1", type_id::Q4_1),
    ("Q5_0", type_id::Q5_0),
    ("Q5_1", type_id::Q5_1),
    ("Q8_0", type_id::Q8_0),
    ("Q4_K", type_id::Q4_K),
    ("Q5_K", type_id::Q5_K),
    ("Q6_K", type_id::Q6_K),
    ("IQ4_XS", type_id::IQ4_XS),
];

pub fn setup() -> (Context, Queue, MatrixKernels) {
    let dev = sycl::default_device().expect("a SYCL device (see `strata devices`)");
    let ctx = Context::new(std::slice::from_ref(&dev)).expect("SYCL context");
    let q = ctx.queue(&dev).expect("SYCL queue");
    let k = MatrixKernels::new(&ctx);
    (ctx, q, k)
}

pub fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

/// `n` values like trained weights (sum of uniforms, a few 4x outliers).
pub fn values(rng: &mut StdRng, n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let u: f32 = (0..4).map(|_| rng.gen::<f32>()).sum::<f32>() - 2.0;
            if i % 97 == 13 {
                u * 4.0
            } else {
                u
            }
        })
        .collect()
}

/// Fresh random (n_out, n_in) weights quantized with engine/quant's quantizer.
pub fn weights(rng: &mut StdRng, tid: u32, n_out: usize, n_in: usize) -> Vec<u8> {
    let f: Vec<f32> = values(rng, n_out * n_in).iter().map(|v| v * 0.05).collect();
    quant::quantize_by_type(tid, &f).expect("quantize random weights")
}

/// sum((a-b)^2) / sum(b^2), b the f64 reference.
pub fn nmse(a: &[f32], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let num: f64 = a.iter().zip(b).map(|(&x, &y)| (x as f64 - y).powi(2)).sum();
    let den: f64 = b.iter().map(|y| y * y).sum();
    num / den
}

/// Whether the kernel block divides n_in (K-quants need multiples of 256).
pub fn fits(tid: u32, n_in: usize) -> bool {
    let (elems, _) = strata::kernels::qmatrix::kernel_block(tid).expect("supported format");
    n_in % elems == 0
}

/// One random product's inputs: (n_out, n_in) weights of a format (bytes and uploaded) and t
/// activation rows (host and device).
pub struct Product {
    pub wb: Vec<u8>,
    pub w: QuantMatrix,
    pub x: Vec<f32>,
    pub xd: DeviceBuffer<f32>,
}

pub fn product(
    rng: &mut StdRng,
    q: &Queue,
    name: &str,
    tid: u32,
    n_out: usize,
    n_in: usize,
    t: usize,
) -> Product {
    let wb = weights(rng, tid, n_out, n_in);
    let w = QuantMatrix::upload(q, name, tid, n_out, n_in, &wb).unwrap();
    let x = values(rng, t * n_in);
    let xd = q.upload(&x).unwrap();
    Product { wb, w, x, xd }
}

/// `k.matmul` of the product into a fresh (t, n_out) buffer, read back.
pub fn run_matmul(k: &MatrixKernels, q: &Queue, p: &Product, t: usize) -> Vec<f32> {
    let mut y = q.alloc::<f32>(t * p.w.view().n_out).unwrap();
    k.matmul(q, &p.w.view(), &p.xd, &mut y, t).unwrap();
    q.to_vec(&y).unwrap()
}

/// How many values differ in their bits.
pub fn bits_differ(a: &[f32], b: &[f32]) -> usize {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .filter(|(x, y)| x.to_bits() != y.to_bits())
        .count()
}

/// NMSE bound of the matrix kernels against the f64 reference (the new formats' parity tests).
pub const PARITY_BOUND: f64 = 1e-7;

/// mmvq at T = 1..8 on `wb` (GGUF bytes only on the device) vs the reference, under
/// `PARITY_BOUND`. Returns the worst NMSE.
pub fn check_mmvq(name: &str, tid: u32, wb: &[u8], n_out: usize, n_in: usize, seed: u64) -> f64 {
    let (_ctx, q, k) = setup();
    let mut r = rng(seed);
    let w = QuantMatrix::upload(&q, name, tid, n_out, n_in, wb).unwrap();
    assert!(
        w.tiled.is_none() && w.buf.is_some(),
        "{name}: GGUF bytes only"
    );
    let x = values(&mut r, 8 * n_in);
    mmvq_parity(&q, &k, name, &w, wb, &x, PARITY_BOUND)
}

/// `k.mmvq` of `w` (whose GGUF bytes are `wb`) on the (8, n_in) activations `x` at T = 1..8 vs
/// the f64 reference: NMSE under `bound`, nothing written past row T, and every row of a T-column
/// call bitwise its one-column call. Prints one line; returns the worst NMSE.
pub fn mmvq_parity(
    q: &Queue,
    k: &MatrixKernels,
    name: &str,
    w: &QuantMatrix,
    wb: &[u8],
    x: &[f32], // (8, n_in)
    bound: f64,
) -> f64 {
    let (tid, n_out, n_in) = (w.type_id, w.n_out, w.n_in);
    let xd = q.upload(x).unwrap();
    let mut yd = q.alloc::<f32>(8 * n_out).unwrap();
    let reference = matrix_ref(tid, wb, n_out, n_in, x, 8).unwrap();
    let mut single = Vec::new();
    for t in 0..8 {
        let xt = q.upload(&x[t * n_in..(t + 1) * n_in]).unwrap();
        let mut yt = q.alloc::<f32>(n_out).unwrap();
        k.mmvq(q, &w.view(), &xt, &mut yt, 1).unwrap();
        single.push(q.to_vec(&yt).unwrap());
    }
    let mut worst = 0f64;
    let mut line = format!("mmvq {name:7} ({n_out:4}, {n_in:4}) nmse T=1..8:");
    for t in 1..=8 {
        q.upload_to(&yd, &vec![f32::NAN; 8 * n_out]).unwrap();
        k.mmvq(q, &w.view(), &xd, &mut yd, t).unwrap();
        let y = q.to_vec(&yd).unwrap();
        let e = nmse(&y[..t * n_out], &reference[..t * n_out]);
        line += &format!(" {e:.1e}");
        worst = worst.max(e);
        assert!(
            e < bound,
            "{name} ({n_out}, {n_in}) T={t}: nmse {e:e} >= {bound:e}"
        );
        assert!(
            y[t * n_out..].iter().all(|v| v.is_nan()),
            "{name} T={t}: wrote past row {t}"
        );
        for (row, s) in single.iter().enumerate().take(t) {
            let got = &y[row * n_out..(row + 1) * n_out];
            assert_eq!(
                bits_differ(got, s),
                0,
                "{name} ({n_out}, {n_in}): row {row} of a T={t} call differs from its one-column call"
            );
        }
    }
    println!("{line}  bitwise vs one-column calls: ok");
    worst
}

/// matmul at `t` rows on `wb` vs the reference. Returns the NMSE.
pub fn check_matmul(name: &str, tid: u32, wb: &[u8], n_out: usize, n_in: usize, t: usize) -> f64 {
    let (_ctx, q, k) = setup();
    let mut r = rng(0x6d6d ^ t as u64);
    let w = QuantMatrix::upload(&q, name, tid, n_out, n_in, wb).unwrap();
    let x = values(&mut r, t * n_in);
    let xd = q.upload(&x).unwrap();
    let mut yd = q.alloc::<f32>(t * n_out).unwrap();
    k.matmul(&q, &w.view(), &xd, &mut yd, t).unwrap();
    let y = q.to_vec(&yd).unwrap();
    let reference = matrix_ref(tid, wb, n_out, n_in, &x, t).unwrap();
    let e = nmse(&y, &reference);
    println!("matmul {name:6} ({n_out:4}, {n_in:4}) T={t:3}: nmse {e:.2e}");
    assert!(
        e < PARITY_BOUND,
        "{name} ({n_out}, {n_in}) T={t}: nmse {e:e}"
    );
    e
}
