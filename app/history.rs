//! Conversation history: one JSON file per conversation under `<data dir>/conversations`, written
//! atomically (temp file, fsync, rename, fsync the directory), reloadable, exportable to markdown.
//! A file that does not parse is moved aside (`NAME.json.corrupt-N`), never overwritten.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, Context, Result};
use serde::{Deserialize, Serialize};
use strata::protocol::Role;

pub const FORMAT_VERSION: u32 = 1;

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Conversation {
    pub version: u32,
    pub id: String,
    /// Unix seconds.
    pub created: u64,
    pub preset: String,
    pub model: String,
    pub messages: Vec<SavedMessage>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct SavedMessage {
    pub role: Role,
    pub content: String,
    /// The reply was cut short (engine died, or the user stopped it).
    #[serde(default)]
    pub interrupted: bool,
}

pub struct HistoryStore {
    dir: PathBuf,
}

/// `2026-11-29` style civil date from days since 1970-01-01 (proleptic Gregorian).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// A sortable, file-name-safe timestamp in UTC: `20261129-231735`.
pub fn stamp(unix: u64) -> String {
    let (y, m, d) = civil_from_days((unix / 86_400) as i64);
    let s = unix % 86_400;
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

pub fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl HistoryStore {
    pub fn new(dir: PathBuf) -> HistoryStore {
        HistoryStore { dir }
    }

    /// `<data dir>/conversations`, from `directories`.
    pub fn default_dir() -> Option<PathBuf> {
        directories::ProjectDirs::from("", "", "strata").map(|d| d.data_dir().join("conversations"))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    /// A fresh id (timestamp, plus a counter if that name is taken).
    pub fn new_id(&self, unix: u64) -> String {
        let base = stamp(unix);
        let mut id = base.clone();
        let mut n = 2;
        while self.path(&id).exists() {
            id = format!("{base}-{n}");
            n += 1;
        }
        id
    }

    pub fn save(&self, c: &Conversation) -> Result<PathBuf> {
        fs::create_dir_all(&self.dir)
            .with_context(|| format!("creating {}", self.dir.display()))?;
        let json = serde_json::to_vec_pretty(c).context("serialising the conversation")?;
        let path = self.path(&c.id);
        write_atomic(&path, &json)?;
        Ok(path)
    }

    /// Loads a conversation. A file that does not parse is renamed aside and the error says where.
    pub fn load(&self, id: &str) -> Result<Conversation> {
        let path = self.path(id);
        let bytes = fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        match serde_json::from_slice::<Conversation>(&bytes) {
            Ok(c) => Ok(c),
            Err(e) => {
                let aside = self.move_aside(&path)?;
                Err(anyhow!(
                    "{} is corrupt ({e}); moved it to {}",
                    path.display(),
                    aside.display()
                ))
            }
        }
    }

    fn move_aside(&self, path: &Path) -> Result<PathBuf> {
        let mut n = 1;
        let aside = loop {
            let p = PathBuf::from(format!("{}.corrupt-{n}", path.display()));
            if !p.exists() {
                break p;
            }
            n += 1;
        };
        fs::rename(path, &aside).with_context(|| format!("moving {} aside", path.display()))?;
        sync_dir(&self.dir)?;
        Ok(aside)
    }

    /// Ids of saved conversations, newest first (ids sort by time).
    pub fn list(&self) -> Result<Vec<String>> {
        let rd = match fs::read_dir(&self.dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e).with_context(|| format!("listing {}", self.dir.display())),
        };
        let mut ids: Vec<String> = rd
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                e.file_name()
                    .to_str()
                    .and_then(|n| n.strip_suffix(".json"))
                    .map(String::from)
            })
            .filter(|n| !n.starts_with('.'))
            .collect();
        ids.sort_unstable_by(|a, b| b.cmp(a));
        Ok(ids)
    }

    /// Writes `<dir>/<id>.md` and returns its path.
    pub fn export_markdown(&self, c: &Conversation, dir: &Path) -> Result<PathBuf> {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join(format!("{}.md", c.id));
        write_atomic(&path, to_markdown(c).as_bytes())?;
        Ok(path)
    }
}

pub fn to_markdown(c: &Conversation) -> String {
    let mut out = format!(
        "# Conversation {}\n\n_model: {} · preset: {}_\n\n",
        c.id, c.model, c.preset
    );
    for m in &c.messages {
        let who = match m.role {
            Role::System => "System",
            Role::User => "You",
            Role::Assistant => "Assistant",
        };
        out.push_str(&format!("## {who}\n\n{}\n", m.content.trim_end()));
        if m.interrupted {
            out.push_str("\n_(interrupted)_\n");
        }
        out.push('\n');
    }
    out
}

/// Temp file in the same directory, fsync, rename over the target, fsync the directory: a crash
/// leaves either the old file or the new one, never a torn one.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| anyhow!("{} has no parent directory", path.display()))?;
    let name = path
        .file_name()
        .map_or("file".into(), |n| n.to_string_lossy().into_owned());
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let res = (|| -> Result<()> {
        let mut f = File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        f.write_all(bytes)
            .with_context(|| format!("writing {}", tmp.display()))?;
        f.sync_all()
            .with_context(|| format!("fsync {}", tmp.display()))?;
        fs::rename(&tmp, path)
            .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
        sync_dir(dir)
    })();
    if res.is_err() {
        let _ = fs::remove_file(&tmp); // best effort: the error below is what matters
    }
    res
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("fsync directory {}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn convo(id: &str) -> Conversation {
        Conversation {
            version: FORMAT_VERSION,
            id: id.into(),
            created: 1_764_458_255,
            preset: "default".into(),
            model: "smol.gguf".into(),
            messages: vec![
                SavedMessage {
                    role: Role::User,
                    content: "Hi".into(),
                    interrupted: false,
                },
                SavedMessage {
                    role: Role::Assistant,
                    content: "Hello **there**".into(),
                    interrupted: true,
                },
            ],
        }
    }

    #[test]
    fn stamp_is_utc_civil_time() {
        assert_eq!(stamp(0), "19700101-000000");
        assert_eq!(stamp(951_782_400), "20000229-000000"); // leap day
        assert_eq!(stamp(1_764_458_255), "20251129-231735");
    }

    #[test]
    fn save_reload_list_and_no_temp_left() {
        let dir = tempfile::tempdir().unwrap();
        let store = HistoryStore::new(dir.path().join("conv"));
        let a = convo(&store.new_id(100));
        store.save(&a).unwrap();
        let b = convo(&store.new_id(100));
        assert_eq!(b.id, format!("{}-2", a.id), "taken id gets a counter");
        store.save(&b).unwrap();
        assert_eq!(store.load(&a.id).unwrap(), a);
        assert_eq!(store.list().unwrap(), vec![b.id.clone(), a.id.clone()]);
        let names: Vec<String> = fs::read_dir(store.dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.contains(".tmp")), "{names:?}");
        // Overwrite with new content: the reload sees the new version.
        let mut a2 = a.clone();
        a2.messages.pop();
        store.save(&a2).unwrap();
        assert_eq!(store.load(&a.id).unwrap().messages.len(), 1);
    }

    #[test]
    fn corrupt_file_is_moved_aside_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let store = HistoryStore::new(dir.path().to_path_buf());
        let bad = b"{\"version\":1,\"id\":\"x\",\"messa";
        fs::write(dir.path().join("x.json"), bad).unwrap();
        let err = store.load("x").unwrap_err().to_string();
        assert!(
            err.contains("corrupt") && err.contains("x.json.corrupt-1"),
            "{err}"
        );
        assert!(!dir.path().join("x.json").exists());
        assert_eq!(fs::read(dir.path().join("x.json.corrupt-1")).unwrap(), bad);
        // A second corrupt file with the same name keeps the first one.
        fs::write(dir.path().join("x.json"), b"[").unwrap();
        assert!(store.load("x").is_err());
        assert_eq!(fs::read(dir.path().join("x.json.corrupt-1")).unwrap(), bad);
        assert_eq!(fs::read(dir.path().join("x.json.corrupt-2")).unwrap(), b"[");
        assert!(
            store.list().unwrap().is_empty(),
            "moved-aside files are not conversations"
        );
    }

    #[test]
    fn export_markdown_writes_roles_and_marks_interruptions() {
        let dir = tempfile::tempdir().unwrap();
        let store = HistoryStore::new(dir.path().join("c"));
        let p = store
            .export_markdown(&convo("c1"), &dir.path().join("out"))
            .unwrap();
        let md = fs::read_to_string(p).unwrap();
        assert!(md.contains("## You\n\nHi\n"), "{md}");
        assert!(
            md.contains("## Assistant\n\nHello **there**\n\n_(interrupted)_"),
            "{md}"
        );
    }
}
