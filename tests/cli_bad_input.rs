//! Bad input to the command-line tools, through the real binary on the default model (SmolLM2,
//! `make setup`): each case ends in an error naming the option or file at fault (exit 1), or for a
//! closed stdout in one "writing to stdout" line instead of a panic. None generates more than one
//! token.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_strata");

fn model() -> PathBuf {
    strata::paths::model_path(strata::paths::SMOLLM2_ENV).unwrap_or_else(|e| panic!("{e}"))
}

fn model_arg() -> String {
    model().display().to_string()
}

/// (training context, vocabulary size) as the GGUF file says.
fn model_sizes() -> (usize, usize) {
    let g = strata::gguf::Gguf::open(model()).expect("open the model");
    let cfg = strata::model::ModelConfig::from_gguf(&g).expect("model config");
    (cfg.n_ctx_train, cfg.n_vocab)
}

fn strata(args: &[&str]) -> Output {
    let out = Command::new(BIN).args(args).output().expect("run strata");
    println!(
        "strata {}: {} | stderr: {}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    out
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The command failed with exit status 1 and one error line containing every one of `needles`.
fn assert_error(out: &Output, needles: &[&str]) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(1), "expected exit 1: {err}");
    assert!(!err.contains("panicked"), "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(last.starts_with("strata: "), "{err}");
    for n in needles {
        assert!(last.contains(n), "{n:?} not in {last:?}");
    }
}

/// Runs `strata args` with stdout into a pipe of one page, reads the first line, closes the
/// read end and waits: the rest of the output cannot fit in the pipe, so the command meets a
/// closed pipe (EPIPE; Rust binaries ignore SIGPIPE). Returns (first line, output).
fn first_line_then_close(args: &[&str]) -> (String, Output) {
    let mut fds = [0; 2];
    // SAFETY: fds has room for the two descriptors pipe2 writes.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(rc, 0, "pipe2: {}", std::io::Error::last_os_error());
    // SAFETY: pipe2 succeeded: both are open descriptors nothing else owns.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: w is an open pipe descriptor; F_SETPIPE_SZ takes an int.
    let size = unsafe { libc::fcntl(w.as_raw_fd(), libc::F_SETPIPE_SZ, 4096) };
    assert!(
        size > 0,
        "F_SETPIPE_SZ: {}",
        std::io::Error::last_os_error()
    );
    // The Command (with this process's copy of the write end) is dropped after the spawn, and
    // the read end is close-on-exec: once `reader` is dropped the pipe has no reader.
    let child = Command::new(BIN)
        .args(args)
        .stdout(Stdio::from(w))
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn strata");
    let mut reader = BufReader::new(File::from(r));
    let mut line = String::new();
    reader.read_line(&mut line).expect("read the first line");
    drop(reader);
    let out = child.wait_with_output().expect("wait for strata");
    println!(
        "strata {} | first line {:?}, then closed: {} | stderr: {}",
        args.join(" "),
        line.trim_end(),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    (line, out)
}

fn assert_clean_pipe_exit(line: &str, out: &Output) {
    let err = stderr(out);
    assert!(!err.contains("panicked"), "{err}");
    assert!(!line.is_empty(), "no first line");
    // as `strata run`: exit 1 and one line saying stdout was closed
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("writing to stdout") && err.contains("Broken pipe"),
        "{err}"
    );
}

#[test]
fn inspect_tensors_into_a_closed_pipe_exits_cleanly() {
    let m = model_arg();
    let (line, out) = first_line_then_close(&["inspect", &m, "--tensors"]);
    assert!(line.starts_with("file:"), "{line:?}");
    assert_clean_pipe_exit(&line, &out);
}

#[test]
fn tokenize_into_a_closed_pipe_exits_cleanly() {
    let dir = tempfile::tempdir().expect("temp dir");
    let text = dir.path().join("long.txt");
    // 20000 tokens, one line each (the text is too long for one command-line argument)
    std::fs::write(&text, "hello world ".repeat(10000)).expect("write the text");
    let m = model_arg();
    let t = text.display().to_string();
    let (line, out) = first_line_then_close(&["tokenize", "-m", &m, "--file", &t]);
    assert!(line.ends_with("tokens\n"), "{line:?}");
    assert_clean_pipe_exit(&line, &out);
}

#[test]
fn split_cpu_1_is_the_default_device_whole() {
    let m = model_arg();
    let base = ["run", "-m", &m, "-p", "Hello", "-n", "1", "--temp", "0"];
    let whole = strata(&base);
    assert!(whole.status.success(), "{}", stderr(&whole));
    let one = strata(&[&base[..], &["--split-cpu", "1"]].concat());
    assert!(
        one.status.success(),
        "--split-cpu 1 failed: {}",
        stderr(&one)
    );
    assert_eq!(
        one.stdout, whole.stdout,
        "--split-cpu 1 generated other text"
    );
    println!("text {:?}", String::from_utf8_lossy(&one.stdout));
    // --layer-split still needs a real split
    let ls = strata(&[&base[..], &["--split-cpu", "1", "--layer-split", "10,20"]].concat());
    assert_error(&ls, &["--layer-split", "--split-cpu"]);

    let dev = strata(&["devices", "--split-cpu", "1"]);
    assert!(
        dev.status.success(),
        "devices --split-cpu 1: {}",
        stderr(&dev)
    );
    let text = String::from_utf8_lossy(&dev.stdout);
    assert!(
        text.contains("not split") && !text.contains("CPU split into"),
        "{text}"
    );
    let json = strata(&["devices", "--split-cpu", "1", "--json"]);
    assert!(json.status.success(), "{}", stderr(&json));
    let j: serde_json::Value = serde_json::from_slice(&json.stdout).expect("devices JSON");
    assert!(j["cpu_split"].is_null(), "{}", j["cpu_split"]);
}

#[test]
fn ctx_past_the_training_context_is_refused_naming_ctx() {
    let (train, _) = model_sizes();
    let m = model_arg();
    let over = (train + 1).to_string();
    let run = |ctx: &str| strata(&["run", "-m", &m, "-p", "Hi", "-n", "1", "--ctx", ctx]);
    assert_error(&run(&over), &[&format!("--ctx {over}"), &train.to_string()]);
    // the allocation it would fail on is never tried
    let huge = run("99999999");
    assert_error(&huge, &["--ctx 99999999", &train.to_string()]);
    assert!(!stderr(&huge).contains("USM"), "{}", stderr(&huge));
    // the training context itself is fine
    let at = run(&train.to_string());
    assert!(at.status.success(), "--ctx {train}: {}", stderr(&at));

    // bench: an explicit --ctx past it is that error, not the depth's
    let (d, ctx) = ((train + 808).to_string(), (train + 908).to_string());
    let b = ["bench", "-m", &m, "-p", "8", "-n", "8", "-r", "1", "-d", &d];
    assert_error(
        &strata(&[&b[..], &["--ctx", &ctx]].concat()),
        &[&format!("--ctx {ctx}"), &train.to_string()],
    );
    // without --ctx, the depth the model was not trained for is named
    let need = (train + 816).to_string();
    assert_error(
        &strata(&b),
        &[&format!("-d {d}"), &need, &train.to_string()],
    );
}

#[test]
fn nll_with_no_token_to_score_is_an_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("text.txt");
    std::fs::write(
        &file,
        "The quick brown fox jumps over the lazy dog. ".repeat(4),
    )
    .expect("write");
    let (m, f) = (model_arg(), file.display().to_string());
    let nll = |extra: &[&str]| strata(&[&["nll", "-m", &m, "-f", &f][..], extra].concat());
    let one = nll(&["--ctx", "1"]);
    assert_error(&one, &["--ctx 1", "no token to score", "--ctx 2"]);
    assert!(one.stdout.is_empty(), "no NaN summary");
    let half = nll(&["--ctx", "2", "--half"]);
    assert_error(
        &half,
        &["--ctx 2", "--half", "no token to score", "--ctx 3"],
    );
    // the smallest contexts that score something still work
    for ok in [&["--ctx", "2"][..], &["--ctx", "3", "--half"]] {
        let out = nll(ok);
        assert!(out.status.success(), "{ok:?}: {}", stderr(&out));
        let s = String::from_utf8_lossy(&out.stdout);
        assert!(!s.contains("NaN") && !s.contains(" 0 tokens scored"), "{s}");
    }
    // a text with no token: the file is named
    let empty = dir.path().join("empty.txt");
    std::fs::write(&empty, "").expect("write");
    let e = empty.display().to_string();
    assert_error(
        &strata(&["nll", "-m", &m, "-f", &e, "--ctx", "8"]),
        &[&e, "0 tokens"],
    );
}

#[test]
fn decode_of_an_id_outside_the_vocabulary_is_an_error() {
    let (_, n_vocab) = model_sizes();
    let m = model_arg();
    let decode = |ids: String| strata(&["tokenize", "-m", &m, "--decode", &ids]);
    assert_error(
        &decode("1 999999 2".into()),
        &["--decode", "999999", &n_vocab.to_string()],
    );
    // ids run 0..n_vocab: n_vocab itself is out
    assert_error(
        &decode(format!("1 {n_vocab} 2")),
        &["--decode", &format!("token id {n_vocab}")],
    );
    let last = decode(format!("1 {} 2", n_vocab - 1));
    assert!(last.status.success(), "{}", stderr(&last));
    assert!(!String::from_utf8_lossy(&last.stdout).contains('\u{FFFD}'));
}

#[test]
fn zero_repetitions_are_refused() {
    let m = model_arg();
    let b = strata(&["bench", "-m", &m, "-p", "8", "-n", "8", "-r", "0"]);
    assert_error(&b, &["--repetitions", "at least 1"]);
    assert!(b.stdout.is_empty(), "no table");
    let p = strata(&["parity", "mmvq-kreg", "--bench", "--reps", "0"]);
    assert_error(&p, &["--reps", "at least 1"]);
    assert!(p.stdout.is_empty(), "no table");
}

#[test]
fn a_missing_model_file_is_one_line_naming_it_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let nope = dir.path().join("nope.gguf").display().to_string();
    for args in [
        &["tokenize", "-m", &nope, "--text", "hi"][..],
        &["inspect", &nope],
        &["run", "-m", &nope, "-p", "hi", "-n", "1"],
    ] {
        let out = strata(args);
        assert_error(&out, &[&format!("cannot read {nope}: No such file")]);
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert_eq!(err.matches(nope.as_str()).count(), 1, "{err}");
    }
}

#[test]
fn inspect_reports_a_file_the_engine_would_not_load_after_the_report() {
    // the real model with llama.block_count = 2^32 - 1 (its u32 follows the key and the type id)
    let mut b = std::fs::read(model()).expect("reading the model");
    let key = b"llama.block_count";
    let at = b
        .windows(key.len())
        .position(|w| w == key)
        .expect("the key is in the file")
        + key.len()
        + 4;
    b[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    let dir = tempfile::tempdir().expect("temp dir");
    let bad = dir.path().join("blocks.gguf");
    std::fs::write(&bad, &b).expect("writing the patched model");
    let out = strata(&["inspect", bad.to_str().expect("UTF-8 path")]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{}", stderr(&out));
    assert!(
        stdout.contains("block_count"),
        "the report is printed first: {stdout}"
    );
    assert_error(
        &out,
        &[
            "would not load",
            "llama.block_count = 4294967295",
            "30 blocks",
        ],
    );
    // the unpatched file still inspects cleanly
    let ok = strata(&["inspect", &model_arg()]);
    assert!(ok.status.success(), "{}", stderr(&ok));
}

#[test]
fn a_bad_sampling_value_is_refused_before_the_model_is_opened() {
    // the model path does not exist: an error naming the parameter (not the file) shows the
    // sampling check ran first, before any load
    let missing = "/nonexistent/strata-test-model.gguf";
    for (flag, name) in [
        ("--temp=-1", "temperature"),
        ("--top-p=1.5", "top_p"),
        ("--repeat-penalty=0", "repeat_penalty"),
    ] {
        let out = strata(&["run", "-m", missing, "-p", "Hello", "-n", "1", flag]);
        assert_error(&out, &[name]);
        assert!(
            !stderr(&out).contains(missing),
            "{flag}: the model file was looked at first: {}",
            stderr(&out)
        );
    }
}
