//! What an A/B runs: the arms (flag sets, by name) and the run spec every arm shares (model,
//! prompts, tokens, speculation, sampler and seed, repetitions). Arms differ in engine
//! environment variables only; everything else is one value for all of them, so the spec is the
//! fairness: the same seed and sampler, the same prompts, the same binary.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use strata::flags::{self, Bitwise, Kind, Scope};
use strata::protocol::Sampling;

/// Arm names that need no definition: the toggles by their short names.
pub const BUILTIN_ARMS: &[(&str, &[(&str, &str)])] = &[
    ("default", &[]),
    ("kreg", &[("STRATA_MMVQ_KREG", "1")]),
    ("hc-q8", &[("STRATA_HC_Q8", "1")]),
    ("gr-fused", &[("STRATA_GR_FUSED", "1")]),
    ("vnni", &[("STRATA_VNNI", "1")]),
];

/// One flag set: the engine variables it sets (every other result-changing variable is unset
/// in its engine, whatever the calling shell has).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Arm {
    /// As the user named it (`kreg`, `hc-q8+gr-fused`, `STRATA_FUSED=0`, a preset's arm).
    pub name: String,
    /// Variable -> value, e.g. `STRATA_MMVQ_KREG` -> `1`.
    pub set: BTreeMap<String, String>,
}

/// An arm name or a flag assignment that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ArmError(pub String);

fn known_names(named: &BTreeMap<String, Arm>) -> String {
    let mut v: Vec<String> = BUILTIN_ARMS.iter().map(|(n, _)| n.to_string()).collect();
    v.extend(named.keys().cloned());
    v.join(", ")
}

/// Checks `NAME=VALUE` against the flag registry: a known variable that can change what the
/// engine computes or how fast (not a setup path), and a value its kind takes.
fn assignment(part: &str) -> Result<(String, String), ArmError> {
    let (name, value) = part.split_once('=').ok_or_else(|| ArmError(part.into()))?;
    let Some(f) = flags::get(name) else {
        let known: Vec<&str> = flags::FLAGS
            .iter()
            .filter(|f| f.scope != Scope::Setup)
            .map(|f| f.name)
            .collect();
        return Err(ArmError(format!(
            "unknown flag {name} in arm {part:?} (known: {})",
            known.join(", ")
        )));
    };
    if f.scope == Scope::Setup {
        return Err(ArmError(format!(
            "{name} is a setup path, not an engine flag: it cannot be an arm"
        )));
    }
    match f.kind {
        Kind::Switch { .. } if value != "0" && value != "1" => {
            Err(ArmError(format!("{name}={value}: a switch takes 1 or 0")))
        }
        Kind::Value { values, .. } if value.is_empty() => {
            Err(ArmError(format!("{name}= needs a value ({values})")))
        }
        _ => Ok((name.to_string(), value.to_string())),
    }
}

impl Arm {
    /// Parses one arm: a built-in name, a name from `named` (a preset's `[ab.arms]`), or
    /// `+`-joined parts, each a name or `VARIABLE=VALUE` (`kreg+vnni`, `STRATA_FUSED=0`).
    pub fn parse(text: &str, named: &BTreeMap<String, Arm>) -> Result<Arm, ArmError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(ArmError("an empty arm name".into()));
        }
        let mut set = BTreeMap::new();
        for part in text.split('+').map(str::trim) {
            let add: Vec<(String, String)> = if part.contains('=') {
                vec![assignment(part)?]
            } else if let Some((_, vars)) = BUILTIN_ARMS.iter().find(|(n, _)| *n == part) {
                vars.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            } else if let Some(a) = named.get(part) {
                a.set.clone().into_iter().collect()
            } else {
                return Err(ArmError(format!(
                    "unknown arm {part:?} (known: {}; or VARIABLE=VALUE, parts joined by +)",
                    known_names(named)
                )));
            };
            for (k, v) in add {
                if let Some(old) = set.insert(k.clone(), v.clone()) {
                    if old != v {
                        return Err(ArmError(format!("arm {text:?} sets {k} to {old} and {v}")));
                    }
                }
            }
        }
        Ok(Arm {
            name: text.to_string(),
            set,
        })
    }

    /// The toggles as the engine client takes them: every toggle, on where this arm sets `1`.
    pub fn toggles(&self) -> BTreeMap<String, bool> {
        flags::toggles()
            .map(|f| {
                let on = self.set.get(f.name).is_some_and(|v| v == "1");
                (f.name.to_string(), on)
            })
            .collect()
    }

    /// The other result- or speed-changing variables: this arm's values, the rest set empty
    /// (empty means the default by the registry's convention), so a variable left in the
    /// calling shell does not leak into one arm's engine as a difference nobody asked for.
    pub fn env(&self) -> BTreeMap<String, String> {
        flags::FLAGS
            .iter()
            .filter(|f| !f.toggle && matches!(f.scope, Scope::Kernel | Scope::Plan | Scope::Load))
            .map(|f| {
                let v = self.set.get(f.name).cloned().unwrap_or_default();
                (f.name.to_string(), v)
            })
            .collect()
    }

    /// The variables whose value differs between `self` and `base` (unset = the default).
    pub fn differs_from(&self, base: &Arm) -> Vec<&'static flags::Flag> {
        let value = |a: &Arm, f: &flags::Flag| -> String {
            match (a.set.get(f.name), f.kind) {
                (Some(v), _) => v.clone(),
                (None, Kind::Switch { default }) => if default { "1" } else { "0" }.into(),
                (None, Kind::Value { .. }) => String::new(),
            }
        };
        flags::FLAGS
            .iter()
            .filter(|f| value(self, f) != value(base, f))
            .collect()
    }

    /// Whether every variable this arm changes against `base` keeps results bitwise (the
    /// registry's `bitwise` column): then its output must be identical to the base arm's.
    pub fn bitwise_with(&self, base: &Arm) -> bool {
        self.differs_from(base)
            .iter()
            .all(|f| matches!(f.bitwise, Bitwise::Yes | Bitwise::NoResult))
    }

    /// Compact `A=1 B=0` (`-` for none).
    pub fn describe(&self) -> String {
        if self.set.is_empty() {
            return "-".into();
        }
        self.set
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Teacher-forced NLL of a text through the decode windows (`strata nll --windows`), per arm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NllSpec {
    pub file: PathBuf,
    /// Tokens per window (1..=8; the verify window of `--spec windows-1`).
    pub windows: u8,
    /// Chunk length in tokens.
    pub ctx: u32,
    /// Also the KL divergence of each arm's logits from the base arm's over the same text
    /// (`strata nll --kld-base` / `--kld`, issue 28: llama-perplexity's layout, second halves).
    #[serde(default)]
    pub kld: bool,
}

/// Everything the arms share.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSpec {
    pub model: PathBuf,
    /// Each prompt is one user turn of a fresh conversation.
    pub prompts: Vec<String>,
    /// Empty: no system message.
    pub system: String,
    /// Tokens to generate per prompt (`max_tokens`).
    pub n: u32,
    /// Draft tokens per verify window (0: no speculation).
    pub spec: u32,
    /// Context tokens (0: the engine's automatic choice).
    pub ctx: u32,
    pub split_cpu: Option<u32>,
    /// The same sampler and seed for every arm (`seed` is always set: a clock seed would make
    /// two arms' samples differ for no reason of theirs).
    pub sampling: Sampling,
    /// Rounds of A B A B ...
    pub reps: u32,
    pub arms: Vec<Arm>,
    pub nll: Option<NllSpec>,
}

impl RunSpec {
    /// Checks what a run needs before any engine starts.
    pub fn validate(&self) -> Result<(), ArmError> {
        if self.arms.len() < 2 {
            return Err(ArmError(format!(
                "an A/B needs two arms or more (got {}: --arms A,B)",
                self.arms.len()
            )));
        }
        for (i, a) in self.arms.iter().enumerate() {
            if self.arms[..i].iter().any(|b| b.name == a.name) {
                return Err(ArmError(format!("arm {:?} is named twice", a.name)));
            }
        }
        if self.prompts.is_empty() || self.prompts.iter().any(|p| p.trim().is_empty()) {
            return Err(ArmError(
                "no prompt, or an empty one: give -p TEXT or --prompt-file".into(),
            ));
        }
        if self.n == 0 || self.reps == 0 {
            return Err(ArmError("-n and -r must be at least 1".into()));
        }
        if self.sampling.seed.is_none() {
            return Err(ArmError("the sampler needs a fixed seed in an A/B".into()));
        }
        Ok(())
    }
}

/// A preset's `[ab]` section: the arms `strata ab --preset NAME` runs and the defaults of the
/// run (the preset gives the model, context, sampling, speculation and system prompt).
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AbSection {
    /// Arm names, in order (built-in, `[ab.arms]`, or `VAR=V` forms).
    #[serde(default)]
    pub run: Vec<String>,
    /// Named flag sets: `[ab.arms.NAME]` with `VARIABLE = "value"` (or true/false for a switch).
    #[serde(default)]
    pub arms: BTreeMap<String, BTreeMap<String, toml::Value>>,
    #[serde(default)]
    pub prompts: Vec<String>,
    pub n: Option<u32>,
    pub reps: Option<u32>,
    /// A text file for the NLL through the decode windows.
    pub nll: Option<String>,
}

impl AbSection {
    /// The named arms, checked against the registry.
    pub fn named_arms(&self) -> Result<BTreeMap<String, Arm>, ArmError> {
        let mut out = BTreeMap::new();
        for (name, vars) in &self.arms {
            if name.contains(['+', '=', ',']) || BUILTIN_ARMS.iter().any(|(n, _)| n == name) {
                return Err(ArmError(format!(
                    "[ab.arms.{name}]: a built-in arm name or one with + = , in it"
                )));
            }
            let mut set = BTreeMap::new();
            for (k, v) in vars {
                let value = match v {
                    toml::Value::Boolean(b) => if *b { "1" } else { "0" }.to_string(),
                    toml::Value::String(s) => s.clone(),
                    toml::Value::Integer(i) => i.to_string(),
                    other => {
                        return Err(ArmError(format!(
                            "[ab.arms.{name}] {k} = {other}: give true/false or a string"
                        )))
                    }
                };
                let (k, v) = assignment(&format!("{k}={value}"))
                    .map_err(|e| ArmError(format!("[ab.arms.{name}]: {e}")))?;
                set.insert(k, v);
            }
            out.insert(
                name.clone(),
                Arm {
                    name: name.clone(),
                    set,
                },
            );
        }
        Ok(out)
    }

    /// The arms of `names` (or of `run` when `names` is empty).
    pub fn arms(&self, names: &[String]) -> Result<Vec<Arm>, ArmError> {
        let named = self.named_arms()?;
        let names = if names.is_empty() { &self.run } else { names };
        names.iter().map(|n| Arm::parse(n, &named)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none() -> BTreeMap<String, Arm> {
        BTreeMap::new()
    }

    #[test]
    fn builtin_and_combined_arms() {
        let a = Arm::parse("hc-q8+gr-fused", &none()).unwrap();
        assert_eq!(a.describe(), "STRATA_GR_FUSED=1 STRATA_HC_Q8=1");
        let t = a.toggles();
        assert!(t["STRATA_HC_Q8"] && t["STRATA_GR_FUSED"] && !t["STRATA_VNNI"]);
        let d = Arm::parse("default", &none()).unwrap();
        assert_eq!(d.describe(), "-");
        assert!(d.differs_from(&d).is_empty() && d.bitwise_with(&d));
        let k = Arm::parse("kreg", &none()).unwrap();
        assert_eq!(k.differs_from(&d).len(), 1);
        assert!(!k.bitwise_with(&d), "KREG is not bitwise (docs/flags.md)");
        let f = Arm::parse("STRATA_FUSED=0", &none()).unwrap();
        assert!(f.bitwise_with(&d), "STRATA_FUSED is bitwise");
        assert_eq!(f.env()["STRATA_FUSED"], "0");
        assert_eq!(
            d.env()["STRATA_FUSED"],
            "",
            "unset in the engine, whatever the shell has"
        );
        // the default of a switch counts as its value: FUSED=1 is the default arm
        assert!(Arm::parse("STRATA_FUSED=1", &none())
            .unwrap()
            .differs_from(&d)
            .is_empty());
    }

    #[test]
    fn bad_arms_say_what_is_known() {
        let e = Arm::parse("kerg", &none()).unwrap_err().to_string();
        assert!(
            e.contains("unknown arm \"kerg\"") && e.contains("kreg"),
            "{e}"
        );
        let e = Arm::parse("STRATA_NOPE=1", &none())
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown flag STRATA_NOPE"), "{e}");
        let e = Arm::parse("STRATA_VNNI=yes", &none())
            .unwrap_err()
            .to_string();
        assert!(e.contains("takes 1 or 0"), "{e}");
        let e = Arm::parse("STRATA_MODEL_GEMMA3=/x", &none())
            .unwrap_err()
            .to_string();
        assert!(e.contains("setup path"), "{e}");
        let e = Arm::parse("kreg+STRATA_MMVQ_KREG=0", &none())
            .unwrap_err()
            .to_string();
        assert!(e.contains("sets STRATA_MMVQ_KREG to 1 and 0"), "{e}");
    }

    #[test]
    fn preset_section_arms() {
        let s: AbSection = toml::from_str(
            "run = [\"default\", \"plain\"]\nn = 64\n[arms.plain]\nSTRATA_FUSED = false\nSTRATA_MATMUL_TILE = \"2x8\"\n",
        )
        .unwrap();
        let arms = s.arms(&[]).unwrap();
        assert_eq!(arms[1].describe(), "STRATA_FUSED=0 STRATA_MATMUL_TILE=2x8");
        let bad: AbSection = toml::from_str("[arms.x]\nSTRATA_NOPE = true\n").unwrap();
        let e = bad.arms(&["x".into()]).unwrap_err().to_string();
        assert!(
            e.starts_with("[ab.arms.x]: unknown flag STRATA_NOPE"),
            "{e}"
        );
        assert!(toml::from_str::<AbSection>("arms_typo = 1\n").is_err());
    }
}
