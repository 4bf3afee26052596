//! Per-window ms per flag set over a conversation (issue 29), kept beside the history so they
//! survive a restart of the app: `<data dir>/medians/<conversation id>.json`, written atomically
//! (`history::write_atomic`). A file that does not parse is moved aside (`NAME.json.corrupt-N`),
//! reported, and the conversation starts a fresh record: never overwritten, never lost.
//!
//! A flag set is keyed by what it sets (`Arm::describe`: `-` for the defaults, `STRATA_VNNI=1`):
//! the chat's windows count under the running engine's toggles, an A/B arm's under its own.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::ab::spec::Arm;
use crate::ab::stats::Spread;
use crate::history;

pub const FORMAT_VERSION: u32 = 1;
/// Windows kept per flag set (the newest): a median over a long conversation without the file
/// growing without bound (4096 windows ~ 40 kB of JSON).
pub const MAX_WINDOWS: usize = 4096;

/// One flag set's windows in this conversation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FlagSet {
    /// Where its windows came from: `chat` and/or A/B arm names, in first-seen order.
    pub sources: Vec<String>,
    /// Per-window ms, oldest first, at most `MAX_WINDOWS`.
    pub window_ms: Vec<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Medians {
    pub version: u32,
    pub conversation: String,
    /// Flag set (`Arm::describe`) -> its windows.
    pub sets: BTreeMap<String, FlagSet>,
}

/// The key of the flag set the toggles `on` make (the chat engine's, as latched).
pub fn key_of_toggles(on: &BTreeMap<String, bool>) -> String {
    Arm {
        name: String::new(),
        set: on
            .iter()
            .filter(|(_, v)| **v)
            .map(|(k, _)| (k.clone(), "1".to_string()))
            .collect(),
    }
    .describe()
}

impl Medians {
    pub fn new(conversation: &str) -> Medians {
        Medians {
            version: FORMAT_VERSION,
            conversation: conversation.to_string(),
            sets: BTreeMap::new(),
        }
    }

    /// Adds windows of flag set `key`, seen from `source`.
    pub fn record(&mut self, key: &str, source: &str, ms: &[f64]) {
        let set = self.sets.entry(key.to_string()).or_default();
        if !set.sources.iter().any(|s| s == source) {
            set.sources.push(source.to_string());
        }
        set.window_ms
            .extend(ms.iter().copied().filter(|m| m.is_finite()));
        let over = set.window_ms.len().saturating_sub(MAX_WINDOWS);
        set.window_ms.drain(..over);
    }

    /// Median and spread of flag set `key`'s windows.
    pub fn spread(&self, key: &str) -> Option<Spread> {
        self.sets.get(key).and_then(|s| Spread::of(&s.window_ms))
    }
}

/// `<data dir>/medians/<id>.json`, beside `<data dir>/conversations/` (the history's dir).
pub fn path(history_dir: &Path, id: &str) -> Result<PathBuf> {
    history::check_id(id)?;
    let data = history_dir.parent().unwrap_or(history_dir);
    Ok(data.join("medians").join(format!("{id}.json")))
}

/// What loading found.
#[derive(Debug, PartialEq)]
pub enum Loaded {
    /// No file yet: an empty record.
    Fresh(Medians),
    Read(Medians),
    /// The file did not parse: it was moved to `aside`; an empty record.
    Corrupt {
        fresh: Medians,
        aside: PathBuf,
        why: String,
    },
}

/// Reads the record of conversation `id` at `path`; a bad file is moved aside, not lost.
pub fn load(path: &Path, id: &str) -> Result<Loaded> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Loaded::Fresh(Medians::new(id)))
        }
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    match serde_json::from_slice::<Medians>(&bytes) {
        Ok(m) if m.version == FORMAT_VERSION => Ok(Loaded::Read(m)),
        res => {
            let why = match res {
                Ok(m) => format!(
                    "format version {} (this build reads {FORMAT_VERSION})",
                    m.version
                ),
                Err(e) => e.to_string(),
            };
            let mut n = 1;
            let aside = loop {
                let p = PathBuf::from(format!("{}.corrupt-{n}", path.display()));
                if !p.exists() {
                    break p;
                }
                n += 1;
            };
            fs::rename(path, &aside)
                .with_context(|| format!("moving the bad {} aside", path.display()))?;
            Ok(Loaded::Corrupt {
                fresh: Medians::new(id),
                aside,
                why,
            })
        }
    }
}

/// Writes the record atomically (a crash leaves the old file or the new one, never half).
pub fn save(path: &Path, m: &Medians) -> Result<()> {
    let dir = path.parent().context("the medians file has no directory")?;
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    history::write_atomic(path, &serde_json::to_vec_pretty(m)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "20261203-101500";

    #[test]
    fn record_caps_and_keys() {
        let mut m = Medians::new(ID);
        m.record("-", "chat", &[3.0, 1.0, 2.0, f64::NAN]);
        m.record("-", "default", &[4.0]);
        assert_eq!(m.sets["-"].sources, ["chat", "default"]);
        assert_eq!(m.spread("-").unwrap().median, 2.5);
        let many: Vec<f64> = (0..MAX_WINDOWS + 10).map(|i| i as f64).collect();
        m.record("STRATA_VNNI=1", "vnni", &many);
        let w = &m.sets["STRATA_VNNI=1"].window_ms;
        assert_eq!((w.len(), w[0]), (MAX_WINDOWS, 10.0), "the newest kept");
        let on = BTreeMap::from([
            ("STRATA_VNNI".to_string(), true),
            ("STRATA_HC_Q8".to_string(), false),
        ]);
        assert_eq!(key_of_toggles(&on), "STRATA_VNNI=1");
        assert_eq!(key_of_toggles(&BTreeMap::new()), "-");
    }

    #[test]
    fn survives_a_round_trip_and_a_bad_file_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let conv = dir.path().join("conversations");
        let p = path(&conv, ID).unwrap();
        assert_eq!(p, dir.path().join("medians").join(format!("{ID}.json")));
        assert!(matches!(load(&p, ID).unwrap(), Loaded::Fresh(_)));
        let mut m = Medians::new(ID);
        m.record("STRATA_FUSED=0", "unfused", &[5.0, 7.0, 6.0]);
        save(&p, &m).unwrap();
        match load(&p, ID).unwrap() {
            Loaded::Read(r) => {
                assert_eq!(r, m);
                assert_eq!(r.spread("STRATA_FUSED=0").unwrap().median, 6.0);
            }
            other => panic!("{other:?}"),
        }
        fs::write(&p, b"{\"version\":1,\"sets\":{\"-\":").unwrap();
        match load(&p, ID).unwrap() {
            Loaded::Corrupt { fresh, aside, why } => {
                assert!(fresh.sets.is_empty());
                assert_eq!(aside, PathBuf::from(format!("{}.corrupt-1", p.display())));
                assert_eq!(
                    fs::read(&aside).unwrap(),
                    b"{\"version\":1,\"sets\":{\"-\":"
                );
                assert!(why.contains("EOF"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        assert!(!p.exists(), "moved, not overwritten");
        assert!(path(&conv, "../x").is_err(), "a bad id names no file");
    }
}
