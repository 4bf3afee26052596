//! `strata parity <family> --selftest | --bench | --sweep`: kernel-family parity checks and
//! micro-benchmarks through the real SYCL device. One file per family under `parity/`; add a
//! `Family` variant and a match arm per new family.

mod hc_fast;
mod hc_fast_bench;
mod mmvq_kreg;

use anyhow::{bail, Result};
use strata::kernels::hc_fast::Variant;

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum Family {
    /// The KREG mmvq kernels (STRATA_MMVQ_KREG=1) against the default mmvq kernels.
    MmvqKreg,
    /// The Q8_0 hyper-connection read (STRATA_HC_Q8=1) against the f64 reference and the
    /// default read.
    HcQ8,
    /// The fused BF16 hyper-connection read (STRATA_GR_FUSED=1) against the f64 reference and
    /// the default read.
    GrFused,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Kernel family to check.
    #[arg(value_enum)]
    family: Family,
    /// Run the parity self-test; prints `PASS n/N` and fails unless every check passes.
    #[arg(long)]
    selftest: bool,
    /// Microseconds per call, default -> family, at the family's benchmark shapes.
    #[arg(long)]
    bench: bool,
    /// Sweep the family's launch geometry (how its built-in choices were made).
    #[arg(long)]
    sweep: bool,
    /// Internal (the self-test starts it): build share I of N of the self-test's modules
    /// into the disk cache, e.g. `1/2`, and exit.
    #[arg(long, hide = true, value_name = "I/N")]
    prebuild_share: Option<String>,
    /// Timed repetitions per figure (the median is printed; at least 1).
    #[arg(long, default_value_t = 5)]
    reps: usize,
}

pub fn run(a: Args) -> Result<()> {
    if let Some(s) = &a.prebuild_share {
        let parsed = s
            .split_once('/')
            .and_then(|(i, n)| Some((i.parse::<usize>().ok()?, n.parse::<usize>().ok()?)))
            .filter(|&(i, n)| i < n);
        let Some((share, of)) = parsed else {
            bail!("--prebuild-share {s:?}: expected I/N with I < N, e.g. 1/2");
        };
        return match a.family {
            Family::MmvqKreg => mmvq_kreg::prebuild_share(share, of),
            Family::HcQ8 | Family::GrFused => {
                bail!("--prebuild-share: only mmvq-kreg prebuilds its modules")
            }
        };
    }
    if a.reps == 0 && (a.bench || a.sweep) {
        bail!("--reps 0: --bench and --sweep need at least 1 repetition");
    }
    if !(a.selftest || a.bench || a.sweep) {
        bail!(
            "strata parity {:?}: pass --selftest, --bench or --sweep",
            a.family
        );
    }
    match a.family {
        Family::MmvqKreg => {
            if a.selftest {
                mmvq_kreg::selftest()?;
            }
            if a.bench {
                mmvq_kreg::bench(a.reps)?;
            }
            if a.sweep {
                mmvq_kreg::sweep(a.reps)?;
            }
        }
        Family::HcQ8 | Family::GrFused => {
            let (v, name) = match a.family {
                Family::HcQ8 => (Variant::Q8, "hc-q8"),
                _ => (Variant::Fused, "gr-fused"),
            };
            if a.selftest {
                hc_fast::selftest(v, name)?;
            }
            if a.bench {
                hc_fast_bench::bench(a.reps)?;
            }
            if a.sweep {
                hc_fast_bench::sweep(v, a.reps)?;
            }
        }
    }
    Ok(())
}
