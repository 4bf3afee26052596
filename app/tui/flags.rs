//! The kernel flags the toggles pane offers, and whether each applies to the loaded model and
//! the host (a flag that does not cannot be turned on: it would restart the engine for nothing).

use strata::flags::table;
use strata::protocol::Loaded;

/// One environment flag read by the engine at start.
#[derive(Debug, Clone, Copy)]
pub struct FlagInfo {
    pub name: &'static str,
    /// One line for the toggles pane (the flag registry's help, engine/flags/table.rs).
    pub description: &'static str,
}

/// The toggles pane's order of the registry's toggle flags (`strata::flags::toggles`): the
/// hyper-connection reads first, as in the seeds. Everything else about a flag (its help, the
/// formats it acts on) is read from the registry; `tests::the_pane_offers_the_registry_toggles`
/// keeps this list and the registry's the same set.
const ORDER: &[&str] = &[table::HC_Q8, table::GR_FUSED, table::MMVQ_KREG, table::VNNI];

/// Every flag the app knows, in the pane's order; the engine's `hello` may add more (shown
/// without a description).
pub fn known() -> Vec<FlagInfo> {
    ORDER
        .iter()
        .filter_map(|n| strata::flags::get(n))
        .map(|f| FlagInfo {
            name: f.name,
            description: f.help,
        })
        .collect()
}

/// The formats the flag's kernels take, from the registry (empty: any).
fn formats(name: &str) -> &'static [&'static str] {
    strata::flags::get(name).map_or(&[], |f| f.needs.formats)
}

/// The reason the toggles give for a flag when no model is loaded: nothing can be judged, so
/// the model-dependent flags cannot be turned on yet (one already on can be turned off).
pub const NO_MODEL_YET: &str = "no model loaded yet";

/// The engine's words when `STRATA_VNNI` cannot run on its device (engine/kernels/vnni.rs
/// `refused`): a load error carrying them tells the app the hardware's answer, e.g. on a GPU.
const VNNI_REFUSED: &str = "STRATA_VNNI: the integer-dot kernel cannot run here: ";

pub fn is_known(name: &str) -> bool {
    ORDER.contains(&name)
}

pub fn description(name: &str) -> &'static str {
    known()
        .into_iter()
        .find(|f| f.name == name)
        .map_or("(no description: flag reported by the engine)", |f| {
            f.description
        })
}

/// What the host offers the flags that depend on the hardware (STRATA_VNNI).
#[derive(Debug, Clone, PartialEq)]
pub struct Host {
    /// Err: why the integer-dot kernels cannot run here.
    pub vnni: Result<(), String>,
}

impl Host {
    /// The engine child runs on this machine, so this process's CPU is its CPU: the same test
    /// as the engine's `vnni::isa` (AVX-512 F+BW+VNNI, else AVX2; a `CL_CONFIG_CPU_TARGET_ARCH`
    /// other than `core-avx2` rules both out). Whether the device is a GPU only the engine
    /// knows: its refusal is learned through [`Host::learn`].
    pub fn detect() -> Host {
        let target = std::env::var("CL_CONFIG_CPU_TARGET_ARCH").ok();
        Host {
            vnni: vnni_on_cpu(target.as_deref(), cpu_has_avx512_vnni(), cpu_has_avx2()),
        }
    }

    /// A host on which every flag can run (snapshots must not vary by CPU).
    #[cfg(test)]
    pub fn capable() -> Host {
        Host { vnni: Ok(()) }
    }

    /// Takes the hardware's answer from an engine error: a load refused because STRATA_VNNI
    /// cannot run on the device (a GPU, a CPU the check above passed but the device did not).
    /// Returns true if the error was such a refusal.
    pub fn learn(&mut self, engine_error: &str) -> bool {
        match engine_error.split_once(VNNI_REFUSED) {
            Some((_, why)) => {
                self.vnni = Err(why.trim().to_string());
                true
            }
            None => false,
        }
    }
}

/// The engine's `Isa::unsupported_here` for both forms, as one answer.
fn vnni_on_cpu(target: Option<&str>, avx512_vnni: bool, avx2: bool) -> Result<(), String> {
    match target {
        Some(t) if t.contains("avx2") && avx2 => Ok(()),
        Some(t) => Err(format!(
            "CL_CONFIG_CPU_TARGET_ARCH={t}: not an AVX-512 VNNI or AVX2 target"
        )),
        None if avx512_vnni || avx2 => Ok(()),
        None => Err("this CPU has no AVX-512 VNNI and no AVX2".into()),
    }
}

fn cpu_has_avx512_vnni() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        has!("avx512f") && has!("avx512bw") && has!("avx512vnni")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

fn cpu_has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Ok(()) if `name` changes anything for this model, these flags and this host, else the reason
/// it does not. The toggles refuse to turn on a flag with a reason (turning one off is always
/// allowed); with no model loaded the model-dependent ones cannot be judged, so they wait.
pub fn applies(
    name: &str,
    model: Option<&Loaded>,
    flags: &dyn Fn(&str) -> bool,
    host: &Host,
) -> Result<(), String> {
    if name == "STRATA_VNNI" {
        host.vnni.clone()?;
    }
    if !is_known(name) {
        return Ok(()); // reported by the engine: nothing known to judge it by
    }
    let Some(m) = model else {
        return Err(NO_MODEL_YET.into());
    };
    // the formats a flag's kernels take: Err naming them when the model stores none
    let stores = |types: &[&str]| {
        if m.quant_types.iter().any(|t| types.contains(&t.as_str())) {
            Ok(())
        } else {
            Err(format!("model stores none of {}", types.join("/")))
        }
    };
    match name {
        "STRATA_HC_Q8" if !m.hc => Err("no hyper-connection tensors in this model".into()),
        "STRATA_GR_FUSED" if !m.hc => Err("no hyper-connection tensors in this model".into()),
        "STRATA_GR_FUSED" if flags("STRATA_HC_Q8") => {
            Err("no effect while STRATA_HC_Q8 is on".into())
        }
        "STRATA_MMVQ_KREG" => stores(formats(table::MMVQ_KREG)),
        "STRATA_VNNI" => stores(formats(table::VNNI)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(hc: bool, types: &[&str]) -> Loaded {
        Loaded {
            model: "m.gguf".into(),
            arch: "x".into(),
            n_ctx: 1,
            n_params: 1,
            load_ms: 1.0,
            hc,
            quant_types: types.iter().map(|s| s.to_string()).collect(),
            experts: false,
            synthetic: false,
        }
    }

    #[test]
    fn the_pane_offers_the_registry_toggles() {
        // the pane's list and the engine's registry are one set: a toggle added to
        // engine/flags/table.rs must get a place in ORDER (and the reverse)
        let mut pane: Vec<&str> = known().iter().map(|f| f.name).collect();
        let mut registry: Vec<&str> = strata::flags::toggles().map(|f| f.name).collect();
        pane.sort_unstable();
        registry.sort_unstable();
        assert_eq!(pane, registry);
        for f in known() {
            assert_eq!(description(f.name), strata::flags::flag(f.name).help);
        }
        assert_eq!(
            formats(table::MMVQ_KREG),
            ["Q4_K", "Q5_K", "Q6_K", "IQ4_XS"]
        );
    }

    #[test]
    fn applicability_follows_the_model() {
        let off = |_: &str| false;
        let q8_on = |n: &str| n == "STRATA_HC_Q8";
        let host = Host::capable();
        let applies =
            |n: &str, m: Option<&Loaded>, f: &dyn Fn(&str) -> bool| applies(n, m, f, &host);
        let dense = model(false, &["Q4_1", "F32"]);
        assert!(applies("STRATA_HC_Q8", Some(&dense), &off)
            .unwrap_err()
            .contains("hyper-connection"));
        assert!(applies("STRATA_MMVQ_KREG", Some(&dense), &off).is_err());
        let hc = model(true, &["Q6_K"]);
        assert!(applies("STRATA_HC_Q8", Some(&hc), &off).is_ok());
        assert!(applies("STRATA_GR_FUSED", Some(&hc), &off).is_ok());
        assert!(applies("STRATA_GR_FUSED", Some(&hc), &q8_on)
            .unwrap_err()
            .contains("HC_Q8"));
        assert!(applies("STRATA_MMVQ_KREG", Some(&hc), &off).is_ok());
        assert!(applies("STRATA_VNNI", Some(&dense), &off).is_ok());
        assert!(applies("STRATA_VNNI", Some(&hc), &off).is_ok());
        assert!(
            applies("STRATA_VNNI", Some(&model(false, &["IQ4_XS", "F16"])), &off)
                .unwrap_err()
                .contains("Q4_1")
        );
        // an engine-reported flag the app does not know is not judged
        assert!(applies("STRATA_SOMETHING_NEW", None, &off).is_ok());
    }

    #[test]
    fn with_no_model_loaded_the_model_flags_wait() {
        let off = |_: &str| false;
        for f in known() {
            assert_eq!(
                applies(f.name, None, &off, &Host::capable()).unwrap_err(),
                NO_MODEL_YET,
                "{}",
                f.name
            );
        }
    }

    #[test]
    fn vnni_follows_the_host_and_the_engines_refusal() {
        let off = |_: &str| false;
        let dense = model(false, &["Q4_1"]);
        // the engine's own test, both forms
        assert_eq!(vnni_on_cpu(None, true, true), Ok(()));
        assert_eq!(vnni_on_cpu(None, false, true), Ok(()));
        assert!(vnni_on_cpu(None, false, false)
            .unwrap_err()
            .contains("no AVX2"));
        assert_eq!(vnni_on_cpu(Some("core-avx2"), true, true), Ok(()));
        assert!(vnni_on_cpu(Some("corei7"), true, true)
            .unwrap_err()
            .contains("CL_CONFIG_CPU_TARGET_ARCH=corei7"));
        let no_avx = Host {
            vnni: vnni_on_cpu(None, false, false),
        };
        assert!(applies("STRATA_VNNI", Some(&dense), &off, &no_avx)
            .unwrap_err()
            .contains("no AVX2"));
        // the engine's refusal on a GPU (its error text), learned from a failed load
        let mut host = Host::capable();
        assert!(!host.learn("cannot open /x.gguf: No such file"));
        assert!(host.learn(
            "loading the model: mmvq_vnni: STRATA_VNNI: the integer-dot kernel cannot run here: \
             device Intel(R) Arc(TM) A770 Graphics is not the CPU device"
        ));
        assert_eq!(
            applies("STRATA_VNNI", Some(&dense), &off, &host),
            Err("device Intel(R) Arc(TM) A770 Graphics is not the CPU device".into())
        );
        assert!(applies(
            "STRATA_MMVQ_KREG",
            Some(&model(false, &["Q4_K"])),
            &off,
            &host
        )
        .is_ok());
    }
}
