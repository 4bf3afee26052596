//! Dequantization throughput per format (median of 7 runs over 16 Mi values of random-but-valid
//! blocks). Run: `cargo bench --bench quant_dequant`.

use std::time::Instant;
use strata::quant::{self, type_id};

fn main() {
    let n = 1usize << 24; // values per run
    let x: Vec<f32> = (0..n)
        .map(|i| ((i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as f32 / 16_777_216.0 - 0.5)
        .collect();
    let mut out = vec![0f32; n];
    println!("{:<8} {:>10} {:>12}", "type", "Mvalues/s", "GB/s (in)");
    for tid in [
        type_id::F16,
        type_id::BF16,
        type_id::Q4_0,
        type_id::Q4_1,
        type_id::Q5_0,
        type_id::Q5_1,
        type_id::Q8_0,
        type_id::Q4_K,
        type_id::Q5_K,
        type_id::Q6_K,
        type_id::IQ4_XS,
    ] {
        let name = quant::type_name(tid).expect("listed types are supported");
        let bytes = quant::quantize_by_type(tid, &x).expect("n is a multiple of every block");
        let mut times: Vec<f64> = (0..7)
            .map(|_| {
                let t = Instant::now();
                quant::dequantize_by_type(tid, &bytes, &mut out).expect("sizes match");
                std::hint::black_box(&out);
                t.elapsed().as_secs_f64()
            })
            .collect();
        times.sort_by(f64::total_cmp);
        let t = times[3];
        println!(
            "{:<8} {:>10.0} {:>12.2}",
            name,
            n as f64 / t / 1e6,
            bytes.len() as f64 / t / 1e9
        );
    }
}
