//! The opt-in integer-dot decode products (`sycl/kernels/mmvq_vnni.cpp`, `STRATA_VNNI=1`): the
//! tiled layout of `tiled.rs` times x as the 8-bit integers its rounding made (the stage's
//! integer records, `xstage.rs`), with AVX-512 VNNI `vpdpbusd` through inline assembly. For
//! Q4_0, Q4_1, Q5_0 and Q5_1 at 1..=8 columns, when x comes staged.
//!
//! Not bitwise the default float kernel (the block's integer sum is exact and rounded once), so it
//! is off unless asked for, and the default path is untouched (docs/flags.md). x86 assembly: it
//! runs only where every device of the context is the OpenCL CPU device and this CPU has
//! AVX-512 VNNI; a GPU keeps `mmvq_tiled.cpp`. Reference: `qmatrix::matrix_ref` (f64), checked by
//! `tests/kernels_mmvq.rs`.

use super::qmatrix::MatrixError;
use crate::quant::type_id;
use crate::sycl::{Context, DeviceType};
use std::sync::OnceLock;

/// The environment variable that turns the integer-dot products on (value `1`).
pub const VNNI_ENV: &str = "STRATA_VNNI";

/// Work-items (tiles of 16 rows) per work-group.
pub const TILES_PER_GROUP: usize = 1;

/// Whether `STRATA_VNNI=1` was set: read once per process.
pub fn requested() -> bool {
    static LATCH: OnceLock<bool> = OnceLock::new();
    *LATCH.get_or_init(|| std::env::var(VNNI_ENV).is_ok_and(|v| v == "1"))
}

/// Why `ctx` cannot run the integer-dot kernel, or None when it can: every device the CPU
/// device, and this CPU with AVX-512 F, BW and VNNI.
pub fn unsupported(ctx: &Context) -> Option<String> {
    #[cfg(target_arch = "x86_64")]
    let cpu_ok = std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512vnni");
    #[cfg(not(target_arch = "x86_64"))]
    let cpu_ok = false;
    if !cpu_ok {
        return Some("this CPU has no AVX-512 VNNI".into());
    }
    for d in ctx.devices() {
        match d.info() {
            Ok(i) if i.device_type == DeviceType::Cpu => {}
            Ok(i) => return Some(format!("device {} is not the CPU device", i.name)),
            Err(e) => return Some(format!("device info: {e}")),
        }
    }
    None
}

/// The formats the kernel takes: the 32-element-block ones on `tiled.rs`'s layout, the K-quants
/// on `ktiled.rs`'s.
pub fn supported(t: u32) -> bool {
    stage_block(t).is_some()
}

/// The rounding block whose stage the kernel reads for format `t`: 32 (x rounded as Q8_0, the
/// stage's integer records) or 256 (x rounded as Q8_K, the K stage, xstage.rs).
pub fn stage_block(t: u32) -> Option<usize> {
    match t {
        type_id::Q4_0 | type_id::Q4_1 | type_id::Q5_0 | type_id::Q5_1 => Some(32),
        type_id::Q4_K | type_id::Q5_K | type_id::Q6_K => Some(256),
        _ => None,
    }
}

/// The error for asking for the kernel where it cannot run.
pub(super) fn refused(why: String) -> MatrixError {
    MatrixError::Shape {
        what: "mmvq_vnni".into(),
        message: format!("{VNNI_ENV}: the integer-dot kernel cannot run here: {why}"),
    }
}
