//! The kernel flags the toggles pane offers, and whether each applies to the loaded model.

use strata::protocol::Loaded;

/// One environment flag read by the engine at start.
#[derive(Debug, Clone, Copy)]
pub struct FlagInfo {
    pub name: &'static str,
    /// One line for the toggles pane.
    pub description: &'static str,
}

/// Every flag the app knows; the engine's `hello` may add more (shown without a description).
pub const KNOWN: &[FlagInfo] = &[
    FlagInfo {
        name: "STRATA_HC_Q8",
        description:
            "read hyper-connection down/up projections as Q8_0 in the verify window (more memory)",
    },
    FlagInfo {
        name: "STRATA_GR_FUSED",
        description: "two-kernel BF16 hyper-connection read (same weights, no extra memory)",
    },
    FlagInfo {
        name: "STRATA_MMVQ_KREG",
        description: "KREG small-batch mat-vec kernels for Q4_K/Q5_K/Q6_K/IQ4_XS",
    },
    FlagInfo {
        name: "STRATA_VNNI",
        description: "integer-dot (AVX-512 VNNI / AVX2) mat-vecs on the CPU device, 4/5/6/8-bit",
    },
];

const KREG_TYPES: &[&str] = &["Q4_K", "Q5_K", "Q6_K", "IQ4_XS"];
/// The formats the integer-dot kernels take (engine/kernels/vnni.rs).
const VNNI_TYPES: &[&str] = &[
    "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K",
];

pub fn is_known(name: &str) -> bool {
    KNOWN.iter().any(|f| f.name == name)
}

pub fn description(name: &str) -> &'static str {
    KNOWN
        .iter()
        .find(|f| f.name == name)
        .map_or("(no description: flag reported by the engine)", |f| {
            f.description
        })
}

/// Ok(()) if `name` changes anything for this model with these flags, else the reason it does not.
/// With no model loaded nothing can be judged, so every flag is taken to apply.
pub fn applies(
    name: &str,
    model: Option<&Loaded>,
    flags: &dyn Fn(&str) -> bool,
) -> Result<(), String> {
    let Some(m) = model else { return Ok(()) };
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
        "STRATA_MMVQ_KREG" => stores(KREG_TYPES),
        "STRATA_VNNI" => stores(VNNI_TYPES),
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
        }
    }

    #[test]
    fn applicability_follows_the_model() {
        let off = |_: &str| false;
        let q8_on = |n: &str| n == "STRATA_HC_Q8";
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
        assert!(applies("STRATA_MMVQ_KREG", None, &off).is_ok());
        assert!(applies("STRATA_VNNI", Some(&dense), &off).is_ok());
        assert!(applies("STRATA_VNNI", Some(&hc), &off).is_ok());
        assert!(
            applies("STRATA_VNNI", Some(&model(false, &["IQ4_XS", "F16"])), &off)
                .unwrap_err()
                .contains("Q4_1")
        );
    }
}
