//! The register tile of `sycl/kernels/matmul.cpp` (the prompt path), chosen per device.
//!
//! A matmul work-group is one 16-lane sub-group holding `row_groups * 16` weight rows; each lane
//! keeps `row_groups * tokens` accumulators. On a device whose vector registers hold 16 floats
//! (AVX-512, GPUs) one 16-lane value is one register, and 2 x 8 = 16 accumulators leave room for
//! the weights and x among 32 registers. With AVX2 (8 floats) every 16-lane value takes two of
//! the 16 registers: 2 x 8 needs 32 for the accumulators alone and the loop spills. 1 x 6 needs
//! 12, plus 2 for the weight vector and 1 for the x broadcast. Measured on a 2-core Zen 3 (AVX2),
//! Gemma 3's shapes at T = 512 (`benches/matrix.rs`): 2 x 8 58-61 GFLOP/s, 2 x 4 69-84,
//! 1 x 5 76-130, 1 x 6 98-131, 1 x 7 73-79 (docs/performance.md, session 6).
//!
//! The tile never changes a result: each output is one sequential fma chain over the input
//! columns in either tile (the chunk sums parked in y between chunks are exact f32 stores), so
//! the two tiles agree bitwise (`tests/matrix_kernels.rs` checks it).

use super::MatrixError;
use crate::sycl::{Context, DeviceInfo, DeviceType};

/// `CFG_RG` row groups of 16 rows x `CFG_TT` tokens per lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MatmulTile {
    pub row_groups: usize,
    pub tokens: usize,
}

impl MatmulTile {
    /// For 16-float vector registers (AVX-512 CPUs, GPUs): the tile every earlier figure used.
    pub const WIDE: MatmulTile = MatmulTile {
        row_groups: 2,
        tokens: 8,
    };
    /// For 8-float vector registers (AVX2 CPUs).
    pub const NARROW: MatmulTile = MatmulTile {
        row_groups: 1,
        tokens: 6,
    };

    /// NARROW when every device is a CPU whose native float vector is narrower than 16 lanes,
    /// else WIDE (GPUs keep the tile they had; a context mixing kinds takes WIDE).
    pub fn for_devices(infos: &[DeviceInfo]) -> MatmulTile {
        let narrow = !infos.is_empty()
            && infos.iter().all(|i| {
                i.device_type == DeviceType::Cpu
                    && i.native_vector_width_float > 0
                    && i.native_vector_width_float < 16
            });
        if narrow {
            MatmulTile::NARROW
        } else {
            MatmulTile::WIDE
        }
    }

    /// The tile `ctx`'s devices want; WIDE if a device cannot be asked (the tile changes speed,
    /// never a result).
    pub fn for_context(ctx: &Context) -> MatmulTile {
        let infos: Option<Vec<_>> = ctx.devices().iter().map(|d| d.info().ok()).collect();
        infos.map_or(MatmulTile::WIDE, |i| MatmulTile::for_devices(&i))
    }

    /// `STRATA_MATMUL_TILE`'s tile if it is set, else `ctx`'s devices' (the engine and
    /// benches/matrix.rs, for A/B runs on one machine).
    pub fn for_context_or_env(ctx: &Context) -> Result<MatmulTile, MatrixError> {
        Ok(MatmulTile::from_env()?.unwrap_or_else(|| MatmulTile::for_context(ctx)))
    }

    /// Weight rows per work-group (the launch geometry).
    pub fn rows(&self) -> usize {
        16 * self.row_groups
    }

    /// The build options that bake the tile into the module.
    pub fn options(&self) -> [String; 2] {
        [
            format!("-DCFG_RG={}", self.row_groups),
            format!("-DCFG_TT={}", self.tokens),
        ]
    }

    /// `STRATA_MATMUL_TILE` (e.g. `2x8`, `1x6`): forces the tile, for A/B runs of the prompt
    /// path on one machine. Unset: None. Row groups 1 or 2 (the local-memory weight chunk is
    /// 64 KiB per row group), tokens 1..=16.
    fn from_env() -> Result<Option<MatmulTile>, MatrixError> {
        match crate::flags::flag(crate::flags::table::MATMUL_TILE).value() {
            Some(v) => MatmulTile::parse(&v).map(Some),
            None => Ok(None),
        }
    }

    /// "RGxTT" as `from_env` takes it.
    pub fn parse(v: &str) -> Result<MatmulTile, MatrixError> {
        let bad = || {
            MatrixError::Setting {
            name: "STRATA_MATMUL_TILE",
            value: v.to_string(),
            why: "expected ROWGROUPSxTOKENS with row groups 1 or 2 and tokens 1..=16, e.g. 2x8 or 1x6",
        }
        };
        let (rg, tt) = v.trim().split_once('x').ok_or_else(bad)?;
        let row_groups: usize = rg.parse().map_err(|_| bad())?;
        let tokens: usize = tt.parse().map_err(|_| bad())?;
        if !(1..=2).contains(&row_groups) || !(1..=16).contains(&tokens) {
            return Err(bad());
        }
        Ok(MatmulTile { row_groups, tokens })
    }

    /// "2x8" (bench and log labels).
    pub fn label(&self) -> String {
        format!("{}x{}", self.row_groups, self.tokens)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(device_type: DeviceType, width: u32) -> DeviceInfo {
        DeviceInfo {
            name: "test".into(),
            vendor: String::new(),
            platform: String::new(),
            backend: "opencl".into(),
            driver_version: String::new(),
            version: String::new(),
            device_type,
            compute_units: 2,
            global_mem: 0,
            local_mem: 0,
            max_alloc: 0,
            max_work_group: 0,
            sub_group_sizes: vec![16],
            partition_max_sub_devices: 0,
            native_vector_width_float: width,
            fp16: false,
            fp64: false,
            graphs: "none",
            is_sub_device: false,
            usm_device: true,
            usm_host: true,
            usm_shared: true,
            profiling: true,
        }
    }

    #[test]
    fn choice_by_device() {
        let avx2 = info(DeviceType::Cpu, 8);
        let avx512 = info(DeviceType::Cpu, 16);
        let gpu = info(DeviceType::Gpu, 1);
        assert_eq!(
            MatmulTile::for_devices(std::slice::from_ref(&avx2)),
            MatmulTile::NARROW
        );
        assert_eq!(
            MatmulTile::for_devices(&[avx2.clone(), avx2.clone()]),
            MatmulTile::NARROW
        );
        assert_eq!(MatmulTile::for_devices(&[avx512]), MatmulTile::WIDE);
        // a GPU's native width (often 1) says nothing about registers: it keeps WIDE
        assert_eq!(
            MatmulTile::for_devices(std::slice::from_ref(&gpu)),
            MatmulTile::WIDE
        );
        assert_eq!(MatmulTile::for_devices(&[avx2, gpu]), MatmulTile::WIDE);
        assert_eq!(MatmulTile::for_devices(&[]), MatmulTile::WIDE);
        assert_eq!(
            MatmulTile::for_devices(&[info(DeviceType::Cpu, 0)]),
            MatmulTile::WIDE
        );
    }

    #[test]
    fn geometry_and_options() {
        assert_eq!(MatmulTile::WIDE.rows(), 32);
        assert_eq!(MatmulTile::NARROW.rows(), 16);
        assert_eq!(MatmulTile::NARROW.options(), ["-DCFG_RG=1", "-DCFG_TT=6"]);
        assert_eq!(MatmulTile::WIDE.label(), "2x8");
    }

    #[test]
    fn parse_settings() {
        assert_eq!(MatmulTile::parse("1x6").unwrap(), MatmulTile::NARROW);
        assert_eq!(MatmulTile::parse(" 2x8 ").unwrap(), MatmulTile::WIDE);
        for bad in ["", "2", "x8", "3x8", "0x4", "1x0", "1x17", "2x8x1", "ax6"] {
            let e = MatmulTile::parse(bad).unwrap_err().to_string();
            assert!(e.contains("STRATA_MATMUL_TILE"), "{bad}: {e}");
        }
    }
}
