//! Shared by the real-terminal tests (`tui_e2e*.rs`): the `strata` binary in a detached tmux
//! session of fixed size on a private tmux server, started from a bash prompt whose HOME and XDG
//! config/data/state/cache dirs are a temp dir (the SYCL kernel cache stays the user's, so the
//! engine starts with warm kernels as it would for them); the screen read with `capture-pane`.

// Each test binary compiles this module and uses only part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The binary under test: this build's, or `STRATA_E2E_BIN` (another build, e.g. one without a
/// fix, to see that a test fails without it).
pub fn bin() -> String {
    std::env::var("STRATA_E2E_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_strata").to_string())
}
pub const COLS: u16 = 130;
pub const ROWS: u16 = 40;
pub const PROMPT_MARK: &str = "E2E-SHELL$ ";
/// The tmux session (and so the target of every command).
const SESSION: &str = "e2e";

/// A private tmux server (its own socket, no config file), killed on drop.
pub struct Tmux {
    socket: String,
}

impl Tmux {
    /// `tag` tells apart the servers of several tests running at once in one process.
    pub fn new(tag: &str) -> Tmux {
        let ok = Command::new("tmux").arg("-V").output();
        assert!(
            ok.is_ok_and(|o| o.status.success()),
            "tmux is needed for this test (apt-get install tmux; .ci/run installs it)"
        );
        Tmux {
            socket: format!("strata-{tag}-{}", std::process::id()),
        }
    }

    /// Runs a tmux command on this server; a failing one fails the test.
    pub fn cmd(&self, args: &[&str]) -> String {
        let out = self.try_cmd(args);
        assert!(
            out.status.success(),
            "tmux {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs a tmux command on this server and returns whatever it did.
    pub fn try_cmd(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .expect("running tmux")
    }

    pub fn screen(&self) -> String {
        self.cmd(&["capture-pane", "-p", "-t", SESSION])
    }

    pub fn keys(&self, keys: &[&str]) {
        let mut a = vec!["send-keys", "-t", SESSION];
        a.extend_from_slice(keys);
        self.cmd(&a);
    }

    pub fn type_text(&self, text: &str) {
        self.cmd(&["send-keys", "-t", SESSION, "-l", text]);
    }

    /// Polls the screen until `pred` accepts it; the last screen is printed on timeout.
    pub fn wait<T>(&self, what: &str, secs: u64, mut pred: impl FnMut(&str) -> Option<T>) -> T {
        let t0 = Instant::now();
        let mut last = String::new();
        while t0.elapsed() < Duration::from_secs(secs) {
            last = self.screen();
            if let Some(v) = pred(&last) {
                println!("[{:>5.1} s] {what}", t0.elapsed().as_secs_f64());
                return v;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        panic!("timed out after {secs} s waiting for: {what}\nlast screen:\n{last}");
    }

    /// A tmux format evaluated for the pane, e.g. `#{pane_pid}`.
    pub fn display(&self, format: &str) -> String {
        self.cmd(&["display-message", "-p", "-t", SESSION, format])
            .trim_end_matches('\n')
            .to_string()
    }

    pub fn pane_pid(&self) -> u32 {
        self.display("#{pane_pid}")
            .trim()
            .parse()
            .expect("tmux pane_pid is a number")
    }

    /// Starts the session: a bash prompt (`PROMPT_MARK`) in the environment of `home`, with the
    /// kernel-flag variables removed; waits for the prompt.
    pub fn start_shell(&self, home: &Home) {
        let h = home.path().display().to_string();
        let env = format!(
            "env -u STRATA_HC_Q8 -u STRATA_GR_FUSED -u STRATA_MMVQ_KREG -u STRATA_VNNI HOME={h} \
             XDG_CONFIG_HOME={h}/config XDG_DATA_HOME={h}/data XDG_STATE_HOME={h}/state \
             XDG_CACHE_HOME={h}/cache SYCL_CACHE_DIR={} PS1='{PROMPT_MARK}' \
             bash --norc --noprofile",
            home.kernel_cache
        );
        self.cmd(&[
            "new-session",
            "-d",
            "-s",
            SESSION,
            "-x",
            &COLS.to_string(),
            "-y",
            &ROWS.to_string(),
            &env,
        ]);
        self.wait("the shell prompt", 10, |s| {
            s.contains(PROMPT_MARK.trim_end()).then_some(())
        });
    }

    /// Types `line` at the shell prompt and presses Enter.
    pub fn run_line(&self, line: &str) {
        self.type_text(line);
        self.keys(&["Enter"]);
    }

    /// Waits until the last non-blank line of the screen is the shell prompt again.
    pub fn wait_prompt(&self, what: &str, secs: u64) -> String {
        self.wait(what, secs, |s| {
            let last = s.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
            last.starts_with(PROMPT_MARK.trim_end())
                .then(|| s.to_string())
        })
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

/// A temp HOME with the XDG dirs under it, as the session's shell sees them.
pub struct Home {
    dir: tempfile::TempDir,
    kernel_cache: String,
}

impl Home {
    pub fn new() -> Home {
        let dir = tempfile::tempdir().expect("temp HOME");
        let kernel_cache = strata::sycl::runtime::default_cache_dir()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| format!("{}/cache/strata/sycl-cache", dir.path().display()));
        Home { dir, kernel_cache }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `<data dir>/conversations`, where the app keeps its history (XDG_DATA_HOME/strata/...).
    pub fn conversations(&self) -> PathBuf {
        self.path().join("data/strata/conversations")
    }

    /// `<data dir>/exports`.
    pub fn exports(&self) -> PathBuf {
        self.path().join("data/strata/exports")
    }

    /// A `Command` for the binary with this HOME's environment (no terminal: for what the
    /// binary does before it opens the TUI).
    pub fn command(&self) -> Command {
        let h = self.path();
        let mut c = Command::new(bin());
        for v in [
            "STRATA_HC_Q8",
            "STRATA_GR_FUSED",
            "STRATA_MMVQ_KREG",
            "STRATA_VNNI",
        ] {
            c.env_remove(v);
        }
        c.env("HOME", h)
            .env("XDG_CONFIG_HOME", h.join("config"))
            .env("XDG_DATA_HOME", h.join("data"))
            .env("XDG_STATE_HOME", h.join("state"))
            .env("XDG_CACHE_HOME", h.join("cache"))
            .env("SYCL_CACHE_DIR", &self.kernel_cache);
        c
    }
}

/// The default model (SmolLM2), or a panic saying how to get it.
pub fn smollm2() -> PathBuf {
    strata::paths::model_path(strata::paths::SMOLLM2_ENV)
        .unwrap_or_else(|e| panic!("SmolLM2 model missing (run `make setup`): {e}"))
}

/// Direct children of `pid` whose command line contains `needle`.
pub fn children(pid: u32, needle: &str) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
        // Field 4 (after the parenthesised name, which may hold spaces) is the parent pid.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|s| s.parse::<u32>().ok());
        let cmdline = std::fs::read(format!("/proc/{p}/cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        if ppid == Some(pid) && cmdline.contains(needle) {
            out.push(p);
        }
    }
    out
}

pub fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

/// The number right after `label` on the first line containing it, e.g. "decode 28.2 tok/s".
pub fn number_after(screen: &str, label: &str) -> Option<f64> {
    screen.lines().find_map(|l| {
        let rest = &l[l.find(label)? + label.len()..];
        let num: String = rest
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        num.parse().ok()
    })
}

/// The conversation pane's text: the rows between its top border ("╭ Conversation") and its
/// bottom border, each cut where the side panels start (the "╭ Verify window" corner's column).
pub fn conversation(screen: &str) -> String {
    let col = screen
        .lines()
        .find_map(|l| {
            let at = l.find("╭ Verify window")?;
            Some(l[..at].chars().count())
        })
        .unwrap_or(usize::MAX);
    screen
        .lines()
        .skip_while(|l| !l.starts_with("╭ Conversation"))
        .skip(1)
        .take_while(|l| !l.starts_with('╰'))
        .map(|l| l.chars().take(col).collect::<String>())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether the conversation pane shows a reply's footer ("176 tok · 29.9 tok/s · eos") after the
/// last "You" header: the last prompt answered. A long reply scrolls its own prompt (and every
/// reply before it) off the pane, so with no "You" left on it any footer is the last reply's.
pub fn answered_last_prompt(screen: &str) -> bool {
    let conv = conversation(screen);
    let rows: Vec<&str> = conv.lines().map(|l| l.trim_matches(['│', ' '])).collect();
    let from = rows.iter().rposition(|l| *l == "You").map_or(0, |i| i + 1);
    rows[from..]
        .iter()
        .any(|l| l.contains(" tok · ") && l.contains(" tok/s"))
}

pub fn status_line(screen: &str) -> &str {
    screen.lines().next().unwrap_or("")
}

/// The engine pid the kernel-flags panel shows ("Kernel flags pid N").
pub fn shown_pid(screen: &str) -> Option<u32> {
    number_after(screen, "Kernel flags pid").map(|n| n as u32)
}

pub fn flag_shown_on(screen: &str, name: &str) -> bool {
    screen
        .lines()
        .any(|l| l.contains(&format!("● {name}")) && l.contains(" on "))
}
