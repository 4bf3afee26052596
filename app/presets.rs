//! Presets: TOML files naming a model, context size, sampling, speculation, kernel flags, device
//! split and system prompt. Shipped defaults live in `config/` (embedded in the binary); the user's
//! own go in `<config dir>/presets/*.toml` and override shipped ones of the same name.
//!
//! Unknown keys and bad values are errors carrying the file, line and column.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use strata::protocol::{DeviceSplit, Load, Sampling};
use toml::Spanned;

use crate::ab::spec::AbSection;
use crate::tui::flags;

/// Shipped presets: (name, TOML text).
pub const SHIPPED: &[(&str, &str)] = &[
    ("default", include_str!("../config/default.toml")),
    ("cpu-vnni", include_str!("../config/cpu-vnni.toml")),
    ("gemma3", include_str!("../config/gemma3.toml")),
    ("spec-ab", include_str!("../config/spec-ab.toml")),
    ("smollm2-hc", include_str!("../config/smollm2-hc.toml")),
];

#[derive(Debug, Clone, PartialEq)]
pub struct Preset {
    pub name: String,
    pub description: String,
    /// As written: a path, or `$VAR` naming a setup variable such as `$STRATA_MODEL_SMOLLM2`.
    pub model: Option<String>,
    pub ctx: u32,
    pub sampling: Sampling,
    /// Draft tokens per verify window (0 = no speculation).
    pub spec: u32,
    pub flags: BTreeMap<String, bool>,
    pub split_cpu: Option<u32>,
    pub system_prompt: String,
    /// A base (completion) model: it continues text rather than answering chat turns, and the
    /// TUI says so when it is loaded.
    pub base_model: bool,
    /// Where it came from: "shipped" or the file path.
    pub source: String,
    /// The `[ab]` section: arms and run defaults for `strata ab --preset NAME` (app/ab/).
    pub ab: Option<AbSection>,
}

/// A preset file that could not be used.
#[derive(Debug, Clone, PartialEq)]
pub struct PresetError {
    pub file: String,
    /// 1-based; 0 when the error has no position (e.g. the file cannot be read).
    pub line: usize,
    pub col: usize,
    pub message: String,
}

impl fmt::Display for PresetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(
                f,
                "{}:{}:{}: {}",
                self.file, self.line, self.col, self.message
            )
        }
    }
}

impl std::error::Error for PresetError {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPreset {
    #[serde(default)]
    description: String,
    model: Option<String>,
    ctx: Option<Spanned<i64>>,
    #[serde(default)]
    system_prompt: String,
    #[serde(default)]
    base_model: bool,
    #[serde(default)]
    sampling: RawSampling,
    #[serde(default)]
    speculation: RawSpeculation,
    #[serde(default)]
    devices: RawDevices,
    #[serde(default)]
    flags: BTreeMap<Spanned<String>, bool>,
    ab: Option<AbSection>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawSampling {
    temperature: Option<Spanned<f64>>,
    top_k: Option<Spanned<i64>>,
    top_p: Option<Spanned<f64>>,
    min_p: Option<Spanned<f64>>,
    repeat_penalty: Option<Spanned<f64>>,
    seed: Option<Spanned<i64>>,
    max_tokens: Option<Spanned<i64>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawSpeculation {
    draft_tokens: Option<Spanned<i64>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawDevices {
    split_cpu: Option<Spanned<i64>>,
}

/// The toml parser's message on one line: it puts the expectation on a line of its own
/// ("invalid table header\nexpected `.`, `]`"), and a line break drawn in a pane is dropped, which
/// glued the two ("invalid table headerexpected").
fn one_line(message: &str) -> String {
    message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// 1-based line and column (in characters) of byte offset `at` in `text`.
pub fn line_col(text: &str, at: usize) -> (usize, usize) {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

struct Checker<'a> {
    file: &'a str,
    text: &'a str,
}

impl Checker<'_> {
    fn err(&self, span: Range<usize>, message: String) -> PresetError {
        let (line, col) = line_col(self.text, span.start);
        PresetError {
            file: self.file.to_string(),
            line,
            col,
            message,
        }
    }

    fn float(
        &self,
        v: &Option<Spanned<f64>>,
        key: &str,
        lo: f64,
        hi: f64,
        default: f32,
    ) -> Result<f32, PresetError> {
        match v {
            None => Ok(default),
            Some(s) if (lo..=hi).contains(s.get_ref()) => Ok(*s.get_ref() as f32),
            Some(s) => Err(self.err(
                s.span(),
                format!("{key} = {} is out of range {lo}..={hi}", s.get_ref()),
            )),
        }
    }

    fn int(
        &self,
        v: &Option<Spanned<i64>>,
        key: &str,
        lo: i64,
        hi: i64,
    ) -> Result<Option<i64>, PresetError> {
        match v {
            None => Ok(None),
            Some(s) if (lo..=hi).contains(s.get_ref()) => Ok(Some(*s.get_ref())),
            Some(s) => Err(self.err(
                s.span(),
                format!("{key} = {} is out of range {lo}..={hi}", s.get_ref()),
            )),
        }
    }
}

impl Preset {
    /// Parses one preset. `file` names it in errors; `name` is usually the file stem.
    pub fn parse(name: &str, file: &str, text: &str) -> Result<Preset, PresetError> {
        let raw: RawPreset = toml::from_str(text).map_err(|e| {
            let (line, col) = e.span().map_or((0, 0), |s| line_col(text, s.start));
            PresetError {
                file: file.to_string(),
                line,
                col,
                message: one_line(e.message()),
            }
        })?;
        let c = Checker { file, text };
        let d = Sampling::default();
        let s = &raw.sampling;
        let sampling = Sampling {
            temperature: c.float(
                &s.temperature,
                "sampling.temperature",
                0.0,
                5.0,
                d.temperature,
            )?,
            top_k: c
                .int(&s.top_k, "sampling.top_k", 0, 100_000)?
                .map_or(d.top_k, |v| v as u32),
            top_p: c.float(&s.top_p, "sampling.top_p", 0.0, 1.0, d.top_p)?,
            min_p: c.float(&s.min_p, "sampling.min_p", 0.0, 1.0, d.min_p)?,
            repeat_penalty: c.float(
                &s.repeat_penalty,
                "sampling.repeat_penalty",
                0.5,
                5.0,
                d.repeat_penalty,
            )?,
            seed: c
                .int(&s.seed, "sampling.seed", 0, i64::MAX)?
                .map(|v| v as u64),
            max_tokens: c
                .int(&s.max_tokens, "sampling.max_tokens", 1, 1 << 20)?
                .map_or(d.max_tokens, |v| v as u32),
        };
        let mut flag_map = BTreeMap::new();
        for (k, v) in &raw.flags {
            if !flags::is_known(k.get_ref()) {
                let known: Vec<&str> = flags::known().iter().map(|f| f.name).collect();
                return Err(c.err(
                    k.span(),
                    format!("unknown flag {} (known: {})", k.get_ref(), known.join(", ")),
                ));
            }
            flag_map.insert(k.get_ref().clone(), *v);
        }
        // the arms are checked here, so a bad [ab] is this file's error (with its line)
        if let Some(ab) = &raw.ab {
            // (the section's header is where its line is said: a Spanned section loses serde's
            // unknown-field message)
            let at = text.find("[ab").unwrap_or(0);
            ab.arms(&[])
                .map_err(|e| c.err(at..at, format!("[ab]: {e}")))?;
        }
        Ok(Preset {
            name: name.to_string(),
            description: raw.description,
            model: raw.model,
            ctx: c.int(&raw.ctx, "ctx", 0, 1 << 24)?.unwrap_or(0) as u32,
            sampling,
            spec: c
                .int(
                    &raw.speculation.draft_tokens,
                    "speculation.draft_tokens",
                    0,
                    32,
                )?
                .unwrap_or(0) as u32,
            flags: flag_map,
            split_cpu: c
                .int(&raw.devices.split_cpu, "devices.split_cpu", 1, 64)?
                .map(|v| v as u32),
            system_prompt: raw.system_prompt,
            base_model: raw.base_model,
            source: file.to_string(),
            ab: raw.ab,
        })
    }

    /// The defaults the app starts on when no preset can be read (no model: the user passes one).
    pub fn fallback() -> Preset {
        Preset {
            name: "built-in".into(),
            description: "built-in defaults".into(),
            model: None,
            ctx: 0,
            sampling: Sampling::default(),
            spec: 0,
            flags: BTreeMap::new(),
            split_cpu: None,
            system_prompt: String::new(),
            base_model: false,
            source: "built-in".into(),
            ab: None,
        }
    }

    /// The model path with `$VAR` resolved through the setup variables.
    pub fn model_path(&self) -> Result<PathBuf, String> {
        let Some(m) = &self.model else {
            return Err(format!(
                "preset {} names no model: pass --model PATH",
                self.name
            ));
        };
        match m.strip_prefix('$') {
            Some(var) => {
                strata::paths::model_path(var).map_err(|e| format!("preset {}: {e}", self.name))
            }
            None => Ok(PathBuf::from(m)),
        }
    }

    /// The `load` request for this preset.
    pub fn load_request(&self) -> Result<Load, String> {
        Ok(Load {
            model: self.model_path()?.to_string_lossy().into_owned(),
            ctx: self.ctx,
            devices: DeviceSplit {
                split_cpu: self.split_cpu,
            },
            spec: self.spec,
            sampling: self.sampling.clone(),
        })
    }

    /// The context as the preset asks for it: a token count, or "auto" for 0 (the model's
    /// training context within the engine's KV budget, docs/protocol.md).
    pub fn ctx_label(&self) -> String {
        match self.ctx {
            0 => "auto".into(),
            n => n.to_string(),
        }
    }

    /// Every known flag, on or off as this preset says (off when unmentioned).
    pub fn flag_env(&self) -> BTreeMap<String, bool> {
        flags::known()
            .iter()
            .map(|f| {
                (
                    f.name.to_string(),
                    self.flags.get(f.name).copied().unwrap_or(false),
                )
            })
            .collect()
    }
}

/// All presets found, plus the files that failed.
#[derive(Debug, Clone, Default)]
pub struct PresetStore {
    pub presets: Vec<Preset>,
    pub errors: Vec<PresetError>,
}

impl PresetStore {
    /// Shipped presets, then `user_dir/*.toml` (a user preset replaces a shipped one of its name).
    pub fn load(user_dir: Option<&Path>) -> PresetStore {
        let mut store = PresetStore::default();
        for (name, text) in SHIPPED {
            match Preset::parse(name, &format!("config/{name}.toml (shipped)"), text) {
                Ok(mut p) => {
                    p.source = "shipped".into();
                    store.presets.push(p)
                }
                Err(e) => store.errors.push(e),
            }
        }
        if let Some(dir) = user_dir {
            let mut files: Vec<PathBuf> = match std::fs::read_dir(dir) {
                Ok(rd) => rd.filter_map(|e| e.ok().map(|e| e.path())).collect(),
                Err(_) => Vec::new(), // no user presets yet
            };
            files.retain(|p| p.extension().is_some_and(|e| e == "toml"));
            files.sort();
            for path in files {
                match load_file(&path) {
                    Ok(p) => {
                        store.presets.retain(|q| q.name != p.name);
                        store.presets.push(p);
                    }
                    Err(e) => store.errors.push(e),
                }
            }
        }
        store
    }

    pub fn find(&self, name: &str) -> Option<&Preset> {
        self.presets.iter().find(|p| p.name == name)
    }

    /// `--preset NAME`: a known name, or a path to a `.toml` file.
    pub fn resolve(&self, name_or_path: &str) -> Result<Preset, PresetError> {
        if let Some(p) = self.find(name_or_path) {
            return Ok(p.clone());
        }
        let path = Path::new(name_or_path);
        if name_or_path.ends_with(".toml") || path.is_file() {
            return load_file(path);
        }
        // a user preset of that name that did not parse: its error, not "no such preset"
        if let Some(e) = self.errors.iter().find(|e| {
            let f = Path::new(&e.file);
            f.extension().is_some_and(|x| x == "toml")
                && f.file_stem().is_some_and(|s| s == name_or_path)
        }) {
            return Err(e.clone());
        }
        let names: Vec<&str> = self.presets.iter().map(|p| p.name.as_str()).collect();
        Err(PresetError {
            file: name_or_path.to_string(),
            line: 0,
            col: 0,
            message: format!("no such preset (have: {})", names.join(", ")),
        })
    }

    /// The shipped default, or the built-in fallback if even that failed.
    pub fn default_preset(&self) -> Preset {
        self.find("default")
            .cloned()
            .unwrap_or_else(Preset::fallback)
    }
}

pub fn load_file(path: &Path) -> Result<Preset, PresetError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| PresetError {
        file: file.clone(),
        line: 0,
        col: 0,
        message: e.to_string(),
    })?;
    let name = path
        .file_stem()
        .map_or("preset".into(), |s| s.to_string_lossy().into_owned());
    Preset::parse(&name, &file, &text)
}

/// `<config dir>/presets`, from `directories`.
pub fn user_dir() -> Option<PathBuf> {
    directories::ProjectDirs::from("", "", "strata").map(|d| d.config_dir().join("presets"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_presets_parse() {
        let store = PresetStore::load(None);
        assert!(store.errors.is_empty(), "{:?}", store.errors);
        let names: Vec<&str> = store.presets.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            ["default", "cpu-vnni", "gemma3", "spec-ab", "smollm2-hc"]
        );
        assert_eq!(
            store.find("default").unwrap().model.as_deref(),
            Some("$STRATA_MODEL_SMOLLM2")
        );
        assert!(store.find("spec-ab").unwrap().spec > 0);
        assert!(store.find("cpu-vnni").unwrap().flags["STRATA_VNNI"]);
        assert_eq!(
            store.find("smollm2-hc").unwrap().model.as_deref(),
            Some("$STRATA_MODEL_SMOLLM2_HC")
        );
    }

    #[test]
    fn the_gemma3_preset_is_a_base_model_with_a_repeat_penalty() {
        // at repeat_penalty 1.0 the base model loops in chat ("What is the capital of France?
        // Parameters" over and over); 1.15 keeps its replies varied (docs/tui.md)
        let store = PresetStore::load(None);
        let g = store.find("gemma3").unwrap();
        assert_eq!(g.sampling.repeat_penalty, 1.15);
        assert!(g.base_model);
        assert!(g.description.contains("base model"), "{}", g.description);
        assert!(!store.find("default").unwrap().base_model);
    }

    #[test]
    fn unknown_key_reports_line_and_column() {
        let text = "ctx = 1024\n[sampling]\ntemperature = 0.5\ntop_q = 3\n";
        let e = Preset::parse("p", "p.toml", text).unwrap_err();
        assert_eq!((e.line, e.col), (4, 1), "{e}");
        assert!(e.message.contains("top_q"), "{e}");
        assert!(e.to_string().starts_with("p.toml:4:1: "), "{e}");
    }

    #[test]
    fn bad_values_report_line_and_column() {
        let e = Preset::parse("p", "p.toml", "[sampling]\ntop_p =   1.5\n").unwrap_err();
        assert_eq!((e.line, e.col), (2, 11), "{e}");
        assert!(e.message.contains("sampling.top_p"), "{e}");

        let e = Preset::parse("p", "p.toml", "\n\nctx = \"big\"\n").unwrap_err();
        assert_eq!(e.line, 3, "{e}");

        let e = Preset::parse("p", "p.toml", "[flags]\nSTRATA_NOPE = true\n").unwrap_err();
        assert_eq!((e.line, e.col), (2, 1), "{e}");
        assert!(e.message.contains("STRATA_NOPE"), "{e}");

        let e = Preset::parse("p", "p.toml", "[speculation]\ndraft_tokens = -1\n").unwrap_err();
        assert_eq!((e.line, e.col), (2, 16), "{e}");
    }

    #[test]
    fn user_presets_override_and_bad_ones_are_listed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("default.toml"),
            "model = \"/x.gguf\"\nctx = 512\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("broken.toml"), "ctx = [\n").unwrap();
        let store = PresetStore::load(Some(dir.path()));
        let d = store.find("default").unwrap();
        assert_eq!((d.ctx, d.model.as_deref()), (512, Some("/x.gguf")));
        assert_eq!(store.errors.len(), 1);
        assert!(
            store.errors[0].file.ends_with("broken.toml") && store.errors[0].line > 0,
            "{:?}",
            store.errors
        );
        assert!(store.resolve("nope").is_err());
        assert_eq!(
            store
                .resolve(dir.path().join("default.toml").to_str().unwrap())
                .unwrap()
                .ctx,
            512
        );
    }

    #[test]
    fn a_user_preset_with_a_syntax_error_is_named_by_its_parse_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("badsyntax.toml"),
            "ctx = 512\n[sampling\ntemperature = 0.5\n",
        )
        .unwrap();
        let store = PresetStore::load(Some(dir.path()));
        let e = store.resolve("badsyntax").unwrap_err();
        let shown = e.to_string();
        assert!(!shown.contains("no such preset"), "{shown}");
        assert!(e.file.ends_with("badsyntax.toml"), "{shown}");
        assert_eq!((e.line, e.col), (2, 10), "{shown}");
        // the parser's two lines joined with a separator: no "invalid table headerexpected"
        assert!(
            e.message.starts_with("invalid table header; expected"),
            "{shown}"
        );
        assert!(!e.message.contains('\n'), "{shown}");
        // a name that is neither a preset nor a broken file still says so
        assert!(store
            .resolve("nope")
            .unwrap_err()
            .to_string()
            .contains("no such preset"));
    }

    #[test]
    fn shipped_presets_take_the_automatic_context() {
        // ctx 0: the training context within the KV budget (SmolLM2: 8192, not 2048)
        for (name, text) in SHIPPED {
            let p = Preset::parse(name, "shipped", text).unwrap();
            assert_eq!((p.name.as_str(), p.ctx), (*name, 0));
            assert_eq!(p.ctx_label(), "auto");
        }
        assert_eq!(Preset::fallback().ctx, 0);
        let p = Preset::parse("p", "p.toml", "ctx = 256\n").unwrap();
        assert_eq!(p.ctx_label(), "256");
    }

    #[test]
    fn shipped_ab_sections_name_the_seed_flags() {
        // `strata ab --preset NAME` (app/ab/): the arms each shipped preset A/Bs
        let store = PresetStore::load(None);
        let arms = |name: &str| -> Vec<String> {
            let ab = store.find(name).unwrap().ab.clone().unwrap();
            ab.arms(&[]).unwrap().iter().map(|a| a.describe()).collect()
        };
        assert_eq!(
            arms("smollm2-hc"),
            ["-", "STRATA_HC_Q8=1", "STRATA_GR_FUSED=1"]
        );
        assert_eq!(arms("gemma3"), ["-", "STRATA_MMVQ_KREG=1"]);
        assert_eq!(arms("cpu-vnni"), ["-", "STRATA_VNNI=1"]);
        assert_eq!(arms("default"), ["-", "STRATA_FUSED=0"]);
    }

    #[test]
    fn a_bad_ab_section_is_the_files_error() {
        let e = Preset::parse(
            "p",
            "p.toml",
            "ctx = 0\n[ab]\nrun = [\"default\", \"kerg\"]\n",
        )
        .unwrap_err();
        assert!(
            e.line >= 2 && e.message.contains("unknown arm \"kerg\""),
            "{e}"
        );
        let e = Preset::parse("p", "p.toml", "[ab]\nrounds = 3\n").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        assert!(e.message.contains("rounds"), "{e}");
        let e = Preset::parse("p", "p.toml", "[ab.arms.x]\nSTRATA_VNNI = \"yes\"\n").unwrap_err();
        assert!(e.message.contains("takes 1 or 0"), "{e}");
    }

    #[test]
    fn flag_env_lists_every_known_flag() {
        let p = Preset::parse("p", "p.toml", "[flags]\nSTRATA_MMVQ_KREG = true\n").unwrap();
        let env = p.flag_env();
        assert_eq!(env.len(), flags::known().len());
        assert!(env["STRATA_MMVQ_KREG"]);
        assert!(!env["STRATA_HC_Q8"]);
    }
}
