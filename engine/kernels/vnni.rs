//! The opt-in integer-dot decode products (`sycl/kernels/mmvq_vnni.cpp`, `STRATA_VNNI=1`): the
//! tiled layout of `tiled.rs` times x as the 8-bit integers its rounding made (the stage's
//! integer records, `xstage.rs`), with AVX-512 VNNI `vpdpbusd` through inline assembly, or on a
//! CPU without it, AVX2's `vpmaddubsw` + `vpmaddwd` (`Isa`). For Q4_0, Q4_1, Q5_0, Q5_1, Q8_0
//! (records of 32) and Q4_K, Q5_K, Q6_K (records of 256), when x comes staged, at any number of
//! columns.
//!
//! Not bitwise the default float kernel (the block's integer sum is exact and rounded once), so it
//! is off unless asked for, and the default path is untouched (docs/flags.md). x86 assembly: it
//! runs only where every device of the context is the OpenCL CPU device and this CPU has AVX2 at
//! least; a GPU keeps `mmvq_tiled.cpp`. Reference: `qmatrix::matrix_ref` (f64), checked by
//! `tests/kernels_vnni.rs`.

use super::qmatrix::MatrixError;
use crate::quant::type_id;
use crate::sycl::{Context, DeviceType};
use std::sync::OnceLock;

/// The environment variable that turns the integer-dot products on (value `1`).
pub const VNNI_ENV: &str = crate::flags::table::VNNI;

/// Work-items (tiles of 16 rows) per work-group.
pub const TILES_PER_GROUP: usize = 1;

/// Whether `STRATA_VNNI=1` was set: read once per process, one stderr line when on (as KREG's).
pub fn requested() -> bool {
    static LATCH: OnceLock<bool> = OnceLock::new();
    *LATCH.get_or_init(|| {
        let on = crate::flags::on(VNNI_ENV);
        if on {
            eprintln!("strata: {VNNI_ENV}=1: integer-dot matrix products where the CPU has them");
        }
        on
    })
}

/// The instructions the kernel's integer dot products are written in (one build option each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Isa {
    /// `vpdpbusd` on 512-bit vectors: 4 u8 x s8 products summed per 32-bit lane, one instruction
    Avx512Vnni,
    /// `vpmaddubsw` + `vpmaddwd` + `vpaddd` on 256-bit vectors (`-DCFG_VNNI_AVX2`)
    Avx2,
}

impl Isa {
    pub fn label(self) -> &'static str {
        match self {
            Isa::Avx512Vnni => "avx512-vnni",
            Isa::Avx2 => "avx2",
        }
    }

    /// The kernel source's build option for this ISA.
    pub fn option(self) -> Option<&'static str> {
        match self {
            Isa::Avx512Vnni => None,
            Isa::Avx2 => Some("-DCFG_VNNI_AVX2"),
        }
    }

    /// Why the CPU device cannot run this ISA's kernel, or None. The device compiles for this
    /// CPU unless `CL_CONFIG_CPU_TARGET_ARCH` names another target: then only a `core-avx2`
    /// target takes the AVX2 form, and the AVX-512 one is not offered.
    fn unsupported_here(self) -> Option<String> {
        let target = std::env::var("CL_CONFIG_CPU_TARGET_ARCH").ok();
        match (self, target.as_deref()) {
            (Isa::Avx512Vnni, Some(t)) => Some(format!(
                "CL_CONFIG_CPU_TARGET_ARCH={t}: not an AVX-512 VNNI target"
            )),
            (Isa::Avx2, Some(t)) if !t.contains("avx2") => {
                Some(format!("CL_CONFIG_CPU_TARGET_ARCH={t}: not an AVX2 target"))
            }
            (Isa::Avx512Vnni, None) if !self.cpu_has() => {
                Some("this CPU has no AVX-512 VNNI".into())
            }
            (Isa::Avx2, _) if !self.cpu_has() => Some("this CPU has no AVX2".into()),
            _ => None,
        }
    }

    /// Whether this CPU has the instructions (AVX-512 F, BW and VNNI; AVX2).
    fn cpu_has(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            match self {
                Isa::Avx512Vnni => has!("avx512f") && has!("avx512bw") && has!("avx512vnni"),
                Isa::Avx2 => has!("avx2"),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        false
    }
}

/// The ISA the kernel runs in on `ctx`: AVX-512 VNNI where the CPU has it, else AVX2; or why
/// neither can run.
pub fn isa(ctx: &Context) -> Result<Isa, String> {
    if let Some(why) = not_cpu_device(ctx) {
        return Err(why);
    }
    match Isa::Avx512Vnni.unsupported_here() {
        None => Ok(Isa::Avx512Vnni),
        Some(why512) => match Isa::Avx2.unsupported_here() {
            None => Ok(Isa::Avx2),
            Some(why2) => Err(format!("{why512}; {why2}")),
        },
    }
}

/// Why `ctx` cannot run `isa`'s kernel, or None when it can.
pub fn unsupported_isa(ctx: &Context, isa: Isa) -> Option<String> {
    not_cpu_device(ctx).or_else(|| isa.unsupported_here())
}

/// Some device of `ctx` that is not the CPU device, named, or None.
fn not_cpu_device(ctx: &Context) -> Option<String> {
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
        type_id::Q4_0 | type_id::Q4_1 | type_id::Q5_0 | type_id::Q5_1 | type_id::Q8_0 => Some(32),
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
