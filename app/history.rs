//! Conversation history: one JSON file per conversation under `<data dir>/conversations`, written
//! atomically (temp file, fsync, rename, fsync the directory), reloadable, exportable to markdown.
//! A file that does not parse is moved aside (`NAME.json.corrupt-N`), never overwritten.
//!
//! Ids name files, so they are checked before any path is made from them: only the form the app
//! writes ([`stamp`], plus `-N` when that name is taken) is an id, which keeps every path inside
//! the conversations (or exports) directory. A bad id — from `--resume` or from inside a file —
//! is an error that names it and touches no file. A file's name is its id: a file whose inner
//! `"id"` is a different valid id is loaded under its file name (so saving it writes back to the
//! file it came from, never to another conversation's file); one whose inner id is not an id at
//! all is refused and left as it is.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, Context, Result};
use serde::{Deserialize, Serialize};
use strata::protocol::{Role, Sampling};

pub const FORMAT_VERSION: u32 = 1;

/// The longest counter after a stamp (`-N`) an id may have: far past any real collision count,
/// short enough that an id is never a long string.
const MAX_COUNTER_DIGITS: usize = 9;
/// Ids quoted in errors are cut to this many characters (an over-long one is still named).
const SHOWN_ID_CHARS: usize = 120;

/// The id quoted for an error: control characters escaped, cut if long.
fn shown(id: &str) -> String {
    let mut s: String = id.chars().take(SHOWN_ID_CHARS).collect();
    if id.chars().count() > SHOWN_ID_CHARS {
        s.push('…');
    }
    format!("\"{}\"", s.escape_debug())
}

/// Whether `id` has the form the app writes: `YYYYMMDD-HHMMSS` or `YYYYMMDD-HHMMSS-N` (ASCII
/// digits; N of 1 to [`MAX_COUNTER_DIGITS`] digits). Nothing else — no `/`, `.`, NUL, empty or
/// long names — so `<dir>/<id>.json` is always a file directly in `<dir>`.
pub fn is_id(id: &str) -> bool {
    let b = id.as_bytes();
    let digits = |r: &[u8]| !r.is_empty() && r.iter().all(u8::is_ascii_digit);
    if b.len() < 15 || !digits(&b[..8]) || b[8] != b'-' || !digits(&b[9..15]) {
        return false;
    }
    match &b[15..] {
        [] => true,
        [b'-', n @ ..] => digits(n) && n.len() <= MAX_COUNTER_DIGITS,
        _ => false,
    }
}

/// `Ok` for an id ([`is_id`]); otherwise an error that names it.
pub fn check_id(id: &str) -> Result<()> {
    if is_id(id) {
        Ok(())
    } else {
        Err(anyhow!(
            "{} is not a conversation id (ids look like 20261202-101500 or 20261202-101500-2: \
             the name of a file in the conversations directory, without .json)",
            shown(id)
        ))
    }
}

/// `<dir>/<id><ext>` for a checked id, and checked again to be a file directly in `dir`.
fn file_in(dir: &Path, id: &str, ext: &str) -> Result<PathBuf> {
    check_id(id)?;
    let path = dir.join(format!("{id}{ext}"));
    // is_id admits no separator or dot-dot, so this holds; kept so a future change to the id
    // form cannot reopen the way out of `dir` silently
    if path.parent() != Some(dir) {
        return Err(anyhow!("{} would leave {}", shown(id), dir.display()));
    }
    Ok(path)
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Conversation {
    pub version: u32,
    pub id: String,
    /// Unix seconds.
    pub created: u64,
    pub preset: String,
    pub model: String,
    pub messages: Vec<SavedMessage>,
    /// The system prompt and sampling set in the app for this conversation (Ctrl+S); absent:
    /// the preset's. Optional, so files without it (older ones) load as they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<ChatSettings>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ChatSettings {
    pub system_prompt: String,
    pub sampling: Sampling,
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

    /// The file of a conversation: an error naming `id` if it is not an id.
    fn path(&self, id: &str) -> Result<PathBuf> {
        file_in(&self.dir, id, ".json")
    }

    /// A fresh id (timestamp, plus a counter if that name is taken).
    pub fn new_id(&self, unix: u64) -> String {
        let base = stamp(unix);
        let mut id = base.clone();
        let mut n = 2;
        while self.dir.join(format!("{id}.json")).exists() {
            id = format!("{base}-{n}");
            n += 1;
        }
        id
    }

    pub fn save(&self, c: &Conversation) -> Result<PathBuf> {
        // the id first: a bad one creates nothing, not even the directory
        let path = self.path(&c.id).context("saving the conversation")?;
        fs::create_dir_all(&self.dir)
            .with_context(|| format!("creating {}", self.dir.display()))?;
        let json = serde_json::to_vec_pretty(c).context("serialising the conversation")?;
        write_atomic(&path, &json)?;
        Ok(path)
    }

    /// Loads a conversation. A file that does not parse is renamed aside and the error says where;
    /// a bad `id`, or a file whose inner id is not an id, is an error that touches nothing. The
    /// conversation comes back under its file's id (see the module doc).
    pub fn load(&self, id: &str) -> Result<Conversation> {
        let path = self.path(id)?;
        let bytes = fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        match serde_json::from_slice::<Conversation>(&bytes) {
            Ok(mut c) => {
                if !is_id(&c.id) {
                    return Err(anyhow!(
                        "{}: its \"id\" {} is not a conversation id; left the file as it is",
                        path.display(),
                        shown(&c.id)
                    ));
                }
                if c.id != id {
                    tracing::warn!(file = %path.display(), inner = %c.id, "conversation id differs from its file name; using the file name");
                    c.id = id.to_string();
                }
                Ok(c)
            }
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
            .filter(|n| is_id(n))
            .collect();
        ids.sort_unstable_by(|a, b| b.cmp(a));
        Ok(ids)
    }

    /// Writes `<dir>/<id>.md` and returns its path (an error naming the id if it is not one).
    pub fn export_markdown(&self, c: &Conversation, dir: &Path) -> Result<PathBuf> {
        let path = file_in(dir, &c.id, ".md").context("exporting the conversation")?;
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
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

    const ID: &str = "20261202-101500";

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
            settings: None,
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
        let bad = b"{\"version\":1,\"id\":\"20261202-101500\",\"messa";
        fs::write(dir.path().join(format!("{ID}.json")), bad).unwrap();
        let err = store.load(ID).unwrap_err().to_string();
        assert!(
            err.contains("corrupt") && err.contains(&format!("{ID}.json.corrupt-1")),
            "{err}"
        );
        assert!(!dir.path().join(format!("{ID}.json")).exists());
        assert_eq!(
            fs::read(dir.path().join(format!("{ID}.json.corrupt-1"))).unwrap(),
            bad
        );
        // A second corrupt file with the same name keeps the first one.
        fs::write(dir.path().join(format!("{ID}.json")), b"[").unwrap();
        assert!(store.load(ID).is_err());
        assert_eq!(
            fs::read(dir.path().join(format!("{ID}.json.corrupt-1"))).unwrap(),
            bad
        );
        assert_eq!(
            fs::read(dir.path().join(format!("{ID}.json.corrupt-2"))).unwrap(),
            b"["
        );
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
            .export_markdown(&convo(ID), &dir.path().join("out"))
            .unwrap();
        let md = fs::read_to_string(p).unwrap();
        assert!(md.contains("## You\n\nHi\n"), "{md}");
        assert!(
            md.contains("## Assistant\n\nHello **there**\n\n_(interrupted)_"),
            "{md}"
        );
    }

    #[test]
    fn ids_are_the_form_the_app_writes_and_nothing_else() {
        for ok in [
            ID,
            "20261202-101500-2",
            "20261202-101500-123456789",
            &stamp(now_unix()),
        ] {
            assert!(is_id(ok), "{ok}");
            check_id(ok).unwrap();
        }
        let long = format!("{ID}-{}", "9".repeat(10_000));
        for bad in [
            "../x",
            "../../../../etc/passwd",
            "/tmp/victim",
            "a/b",
            "20261202/101500",
            "",
            "\0",
            "20261202-101500\0",
            "20261202-101500-1234567890", // a 10-digit counter: over-long
            long.as_str(),
            "20261202-101500-",
            "20261202-101500-x",
            "20261202-1015000",
            "2026120-101500",
            " 20261202-101500",
            "20261202-101500.json",
            "20261202-10150٣", // a non-ASCII digit
            "..",
            ".",
            "x",
        ] {
            assert!(!is_id(bad), "{bad:?}");
            let err = check_id(bad).unwrap_err().to_string();
            assert!(err.contains("is not a conversation id"), "{err}");
            // named (escaped, cut when long)
            let head: String = bad.chars().take(20).collect::<String>();
            assert!(
                err.contains(&head.escape_debug().to_string()),
                "{bad:?}: {err}"
            );
            assert!(err.len() < 400, "an over-long id is cut: {}", err.len());
        }
    }

    /// Every file under `dir` (recursively) with its bytes.
    fn tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
        let mut out = Vec::new();
        for e in fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(tree(&p));
            } else {
                out.push((p.clone(), fs::read(&p).unwrap()));
            }
        }
        out.sort();
        out
    }

    #[test]
    fn a_bad_id_touches_no_file() {
        let root = tempfile::tempdir().unwrap();
        let conv = root.path().join("data/conversations");
        let store = HistoryStore::new(conv.clone());
        store.save(&convo(ID)).unwrap();
        // a file that is no conversation, beside the data dir (the --resume DIR/victim case)
        fs::write(root.path().join("victim.json"), b"{\"precious\":1}").unwrap();
        fs::write(conv.join("victim.json"), b"{\"precious\":2}").unwrap();
        let before = tree(root.path());
        let abs = root.path().join("victim").display().to_string();
        for bad in [
            "../../victim",
            abs.as_str(),
            "sub/victim",
            "victim",
            "",
            "20261202-101500\0",
            "20261202-101500-1234567890",
        ] {
            let err = format!("{:#}", store.load(bad).unwrap_err());
            assert!(err.contains("is not a conversation id"), "{bad:?}: {err}");
            let err = format!("{:#}", store.save(&convo(bad)).unwrap_err());
            assert!(
                err.contains("saving the conversation") && err.contains("not a conversation id"),
                "{bad:?}: {err}"
            );
            let err = format!(
                "{:#}",
                store
                    .export_markdown(&convo(bad), &root.path().join("data/exports"))
                    .unwrap_err()
            );
            assert!(err.contains("not a conversation id"), "{bad:?}: {err}");
            assert_eq!(tree(root.path()), before, "{bad:?}: no rename, no write");
        }
        assert!(!root.path().join("data/exports").exists());
        // a bad id creates nothing, not even the directory
        let fresh = HistoryStore::new(root.path().join("fresh"));
        assert!(fresh.save(&convo("../x")).is_err());
        assert!(!root.path().join("fresh").exists());
        // only ids are listed (victim.json is not a conversation)
        assert_eq!(store.list().unwrap(), vec![ID.to_string()]);
    }

    #[test]
    fn a_hostile_id_inside_a_file_is_refused_and_left_alone() {
        let root = tempfile::tempdir().unwrap();
        let store = HistoryStore::new(root.path().join("conv"));
        fs::create_dir_all(store.dir()).unwrap();
        let mut c = convo(ID);
        c.id = format!("../../../../{}/pwned", root.path().display());
        let json = serde_json::to_vec_pretty(&c).unwrap();
        fs::write(store.dir().join(format!("{ID}.json")), &json).unwrap();
        let before = tree(root.path());
        let err = format!("{:#}", store.load(ID).unwrap_err());
        assert!(
            err.contains(&format!("{ID}.json"))
                && err.contains("pwned")
                && err.contains("not a conversation id"),
            "{err}"
        );
        assert_eq!(tree(root.path()), before, "not renamed, not rewritten");
        // nor can a conversation carrying it be saved or exported anywhere
        assert!(store.save(&c).is_err());
        assert!(store
            .export_markdown(&c, &root.path().join("exports"))
            .is_err());
        assert_eq!(tree(root.path()), before);
    }

    #[test]
    fn a_file_whose_inner_id_differs_is_loaded_under_its_file_name() {
        let dir = tempfile::tempdir().unwrap();
        let store = HistoryStore::new(dir.path().to_path_buf());
        let other = "20261202-101500-2";
        store.save(&convo(other)).unwrap();
        // a copy of it under another name (the user copied the file)
        let copy = fs::read(dir.path().join(format!("{other}.json"))).unwrap();
        fs::write(dir.path().join(format!("{ID}.json")), &copy).unwrap();
        let c = store.load(ID).unwrap();
        assert_eq!(c.id, ID, "the file name wins");
        // so saving it writes back to its own file, not over the other conversation
        let mut changed = c.clone();
        changed.messages.pop();
        assert_eq!(
            store.save(&changed).unwrap(),
            dir.path().join(format!("{ID}.json"))
        );
        assert_eq!(
            fs::read(dir.path().join(format!("{other}.json"))).unwrap(),
            copy
        );
        assert_eq!(store.load(ID).unwrap().messages.len(), 1);
    }
}
