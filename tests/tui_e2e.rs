//! The whole app end to end: the real `strata` binary in a real terminal (a detached tmux session
//! of fixed size), its real `strata engine` child and the real SmolLM2 model. Types like a user,
//! reads the screen like a user (tmux capture-pane), and checks: the model loads, a reply streams
//! and the panels show its speed and windows; toggling STRATA_MMVQ_KREG restarts the engine with
//! the flag on; killing the engine mid-reply keeps the partial reply (marked interrupted) and the
//! engine comes back; quitting restores the terminal (the shell prompt returns, `stty` shows
//! `icanon` and `echo`).
//!
//! Needs tmux (installed by .ci/run). Run with `--nocapture` to see the screens.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_strata");
const COLS: u16 = 130;
const ROWS: u16 = 40;
const PROMPT_MARK: &str = "E2E-SHELL$ ";

struct Tmux {
    socket: String,
}

impl Tmux {
    fn new() -> Tmux {
        let ok = Command::new("tmux").arg("-V").output();
        assert!(
            ok.is_ok_and(|o| o.status.success()),
            "tmux is needed for this test (apt-get install tmux; .ci/run installs it)"
        );
        Tmux {
            socket: format!("strata-e2e-{}", std::process::id()),
        }
    }

    fn cmd(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .expect("running tmux");
        assert!(
            out.status.success(),
            "tmux {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.cmd(&["capture-pane", "-p", "-t", "e2e"])
    }

    fn keys(&self, keys: &[&str]) {
        let mut a = vec!["send-keys", "-t", "e2e"];
        a.extend_from_slice(keys);
        self.cmd(&a);
    }

    fn type_text(&self, text: &str) {
        self.cmd(&["send-keys", "-t", "e2e", "-l", text]);
    }

    /// Polls the screen until `pred` accepts it; the last screen is printed on timeout.
    fn wait<T>(&self, what: &str, secs: u64, mut pred: impl FnMut(&str) -> Option<T>) -> T {
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

    fn pane_pid(&self) -> u32 {
        self.cmd(&["display-message", "-p", "-t", "e2e", "#{pane_pid}"])
            .trim()
            .parse()
            .expect("tmux pane_pid is a number")
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

/// Direct children of `pid` whose command line contains `needle`.
fn children(pid: u32, needle: &str) -> Vec<u32> {
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

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

/// The number right after `label` on the first line containing it, e.g. "decode 28.2 tok/s".
fn number_after(screen: &str, label: &str) -> Option<f64> {
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
fn conversation(screen: &str) -> String {
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

fn status_line(screen: &str) -> &str {
    screen.lines().next().unwrap_or("")
}

/// The engine pid the kernel-flags panel shows ("Kernel flags pid N").
fn shown_pid(screen: &str) -> Option<u32> {
    number_after(screen, "Kernel flags pid").map(|n| n as u32)
}

fn flag_shown_on(screen: &str, name: &str) -> bool {
    screen
        .lines()
        .any(|l| l.contains(&format!("● {name}")) && l.contains(" on "))
}

#[test]
fn tui_against_the_real_engine_in_tmux() {
    let model = strata::paths::model_path(strata::paths::SMOLLM2_ENV)
        .unwrap_or_else(|e| panic!("SmolLM2 model missing (run `make setup`): {e}"));
    let home = tempfile::tempdir().expect("temp HOME");
    let h = home.path().display().to_string();
    // Config, data (history) and state (logs) go to the temp HOME; the SYCL kernel cache stays the
    // user's, so the engine starts with warm kernels as it would for them.
    let kcache = strata::sycl::runtime::default_cache_dir()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| format!("{h}/cache/strata/sycl-cache"));
    let tmux = Tmux::new();
    let env = format!(
        "env -u STRATA_HC_Q8 -u STRATA_GR_FUSED -u STRATA_MMVQ_KREG -u STRATA_VNNI HOME={h} \
         XDG_CONFIG_HOME={h}/config XDG_DATA_HOME={h}/data XDG_STATE_HOME={h}/state \
         XDG_CACHE_HOME={h}/cache SYCL_CACHE_DIR={kcache} PS1='{PROMPT_MARK}' \
         bash --norc --noprofile"
    );
    tmux.cmd(&[
        "new-session",
        "-d",
        "-s",
        "e2e",
        "-x",
        &COLS.to_string(),
        "-y",
        &ROWS.to_string(),
        &env,
    ]);
    tmux.wait("the shell prompt", 10, |s| {
        s.contains(PROMPT_MARK.trim_end()).then_some(())
    });
    tmux.type_text(&format!("{BIN} --model {}", model.display()));
    tmux.keys(&["Enter"]);

    // 1. The model loads.
    let s = tmux.wait("model loaded (engine ready)", 240, |s| {
        let st = status_line(s);
        (st.contains("engine ready") && st.contains("llama")).then(|| s.to_string())
    });
    let tui_pid = children(tmux.pane_pid(), BIN)
        .into_iter()
        .next()
        .expect("the strata TUI runs under the pane's shell");
    let engine1 = shown_pid(&s).expect("the flags panel names the engine pid");
    assert_eq!(
        children(tui_pid, "engine"),
        vec![engine1],
        "the shown pid is the TUI's engine child"
    );
    assert!(s.contains("○ STRATA_MMVQ_KREG  off"), "{s}");

    // 2. A reply streams; the panels show a non-zero rate and window figures.
    tmux.type_text("What is the capital of France?");
    tmux.keys(&["Enter"]);
    let s = tmux.wait("the first reply and its figures", 180, |s| {
        let tps = number_after(s, "decode")?;
        let windows = number_after(s, "tokens/window")?;
        let done = status_line(s).contains("engine ready");
        (done && tps > 0.0 && windows > 0.0).then(|| s.to_string())
    });
    println!("main screen after the first reply ({COLS}x{ROWS}):\n{s}");
    let tps = number_after(&s, "decode").unwrap_or(0.0);
    let median_ms = number_after(&s, "median").unwrap_or(0.0);
    println!("decode {tps} tok/s, median window {median_ms} ms");
    assert!(median_ms > 0.0, "a window median is shown");
    assert!(s.contains("Assistant"), "{s}");

    // 3. Toggle STRATA_MMVQ_KREG (third flag) and apply: the engine restarts with it on.
    tmux.keys(&["C-t"]);
    tmux.wait("the toggles pane", 10, |s| {
        s.contains("Kernel flag toggles").then_some(())
    });
    tmux.keys(&["Down", "Down", "Space"]);
    tmux.wait("KREG pending", 10, |s| {
        s.contains("[x] STRATA_MMVQ_KREG").then_some(())
    });
    tmux.keys(&["Enter"]);
    let s = tmux.wait("restart with KREG on", 240, |s| {
        let pid = shown_pid(s)?;
        let ready = status_line(s).contains("engine ready");
        (ready && pid != engine1 && flag_shown_on(s, "STRATA_MMVQ_KREG")).then(|| s.to_string())
    });
    let engine2 = shown_pid(&s).unwrap_or(0);
    assert!(!alive(engine1), "the old engine {engine1} is gone");
    assert_eq!(children(tui_pid, "engine"), vec![engine2]);
    let environ = std::fs::read(format!("/proc/{engine2}/environ")).unwrap_or_default();
    assert!(
        String::from_utf8_lossy(&environ)
            .split('\0')
            .any(|kv| kv == "STRATA_MMVQ_KREG=1"),
        "the new engine runs with STRATA_MMVQ_KREG=1 in its environment"
    );

    // 4. Kill the engine mid-reply: the partial reply stays (interrupted), the engine returns.
    tmux.type_text("Write a long story about a lighthouse keeper and his cat.");
    tmux.keys(&["Enter"]);
    tmux.wait("the second reply streaming", 120, |s| {
        let streaming = status_line(s).contains("generating");
        // Some words of the reply are in the conversation below the last "Assistant" header.
        let conv = conversation(s);
        let words = conv
            .rsplit_once("Assistant")
            .map(|(_, after)| {
                after
                    .split(|c: char| c.is_whitespace() || c == '│')
                    .filter(|w| !w.is_empty())
                    .count()
            })
            .unwrap_or(0);
        (streaming && words > 12).then_some(())
    });
    // SAFETY: kill(2) with SIGKILL on the engine pid found under our own tmux session.
    assert_eq!(unsafe { libc::kill(engine2 as i32, libc::SIGKILL) }, 0);
    let s = tmux.wait("the reply marked interrupted", 30, |s| {
        s.contains("Assistant · interrupted").then(|| s.to_string())
    });
    assert!(alive(tui_pid), "the TUI survives the engine's death");
    let partial: Vec<String> = conversation(&s)
        .rsplit_once("Assistant · interrupted")
        .map(|(_, a)| {
            a.split(|c: char| c.is_whitespace() || c == '│')
                .filter(|w| !w.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    println!(
        "partial reply kept ({} words): {}…",
        partial.len(),
        partial.join(" ")
    );
    assert!(partial.len() > 12, "the partial reply is kept on screen");
    let s = tmux.wait("the engine restarted and reloaded", 240, |s| {
        let pid = shown_pid(s)?;
        let ready = status_line(s).contains("engine ready");
        (ready && pid != engine2).then(|| s.to_string())
    });
    assert!(s.contains("Assistant · interrupted"), "still shown:\n{s}");
    assert!(
        flag_shown_on(&s, "STRATA_MMVQ_KREG"),
        "the flag survives the respawn"
    );
    let engine3 = shown_pid(&s).unwrap_or(0);
    assert_eq!(children(tui_pid, "engine"), vec![engine3]);

    // 5. Quit: the TUI and its engine exit, the shell prompt returns, the tty is cooked again.
    tmux.keys(&["C-q"]);
    tmux.wait("the shell prompt after quitting", 30, |s| {
        let last = s.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("");
        last.starts_with(PROMPT_MARK.trim_end()).then_some(())
    });
    let t0 = Instant::now();
    while (alive(tui_pid) || alive(engine3)) && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!alive(tui_pid), "the TUI exited");
    assert!(!alive(engine3), "the engine exited with the TUI");
    tmux.type_text("stty -a | tr ' ;' '\\n\\n' | grep -E -x -e '-?icanon' -e '-?echo' | tr '\\n' ' '; echo STTY-END");
    tmux.keys(&["Enter"]);
    let modes = tmux.wait("stty output", 10, |s| {
        s.lines()
            .find(|l| l.trim_end().ends_with("STTY-END") && !l.starts_with(PROMPT_MARK.trim_end()))
            .map(str::to_string)
    });
    println!("terminal modes after quitting: {modes}");
    let words: Vec<&str> = modes.split_whitespace().collect();
    assert!(
        words.contains(&"icanon") && words.contains(&"echo"),
        "the terminal is restored: {modes}"
    );
    let saved = std::fs::read_dir(home.path().join("data/strata/conversations"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert!(
        saved >= 1,
        "the conversation was saved in the temp data dir"
    );
}
