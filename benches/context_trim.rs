//! `cargo bench --bench context_trim [-- --ctx N] [--max-tokens N] [--turns N] [--model PATH]`:
//! a chat that outgrows the context, against `strata engine` (docs/protocol.md, "Prompt" and
//! "Prefix reuse"). Greedy long-paragraph turns (default: ctx 1024, max_tokens 128, 20 turns);
//! per turn the prompt, the tokens prefilled, the messages dropped; then the totals: how many
//! cuts, the tokens prefilled against the prompts' tokens (what prefilling every prompt whole
//! would cost), and the prefill time (the sum over turns; wall-clock figures on a shared machine
//! move, the token counts do not).

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{ChildStdout, Command, Stdio};

const EXE: &str = env!("CARGO_BIN_EXE_strata");
const TOPICS: &[&str] = &[
    "the ocean",
    "mountains",
    "the moon",
    "coffee",
    "bicycles",
    "libraries",
    "rivers",
    "tea",
    "trains",
    "deserts",
    "forests",
    "music",
    "bridges",
    "clocks",
    "islands",
    "winter",
    "gardens",
    "comets",
    "castles",
    "bees",
];

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn until(out: &mut BufReader<ChildStdout>, mut pick: impl FnMut(&Value) -> bool) -> Value {
    let mut line = String::new();
    loop {
        line.clear();
        let n = out.read_line(&mut line).expect("reading the engine");
        assert!(n > 0, "the engine exited");
        let v: Value = serde_json::from_str(&line).expect("a protocol event");
        if v["type"] == "error" && v["id"].is_null() {
            panic!("engine error: {}", v["message"]);
        }
        if pick(&v) {
            return v;
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let num = |name: &str, default: u64| {
        arg(&args, name).map_or(default, |v| v.parse().expect("a number"))
    };
    let (ctx, max_tokens, turns) = (
        num("--ctx", 1024),
        num("--max-tokens", 128),
        num("--turns", 20),
    );
    let model = arg(&args, "--model").unwrap_or_else(|| {
        strata::paths::model_path(strata::paths::SMOLLM2_ENV)
            .expect("SmolLM2 (make setup) or --model PATH")
            .to_string_lossy()
            .into_owned()
    });
    let mut child = Command::new(EXE)
        .arg("engine")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn strata engine");
    let mut stdin = child.stdin.take().expect("piped stdin");
    let mut out = BufReader::new(child.stdout.take().expect("piped stdout"));
    let mut send = |v: Value| {
        writeln!(stdin, "{v}").expect("writing to the engine");
        stdin.flush().expect("flushing");
    };
    let sampling = json!({"temperature": 0, "repeat_penalty": 1.1, "seed": 1,
                          "max_tokens": max_tokens});
    send(json!({"type": "load", "model": model, "ctx": ctx, "sampling": sampling}));
    until(&mut out, |v| v["type"] == "loaded");
    println!("context_trim: {model}, ctx {ctx}, max_tokens {max_tokens}, {turns} turns");
    println!("turn  prompt  prefilled  dropped  n_past  stop");
    let mut messages = vec![json!({"role": "system", "content": "You are a helpful assistant."})];
    let (mut prefilled, mut prompts, mut cuts, mut ms, mut last) = (0u64, 0u64, 0, 0.0, 0);
    for i in 0..turns {
        let topic = TOPICS[i as usize % TOPICS.len()];
        messages.push(json!({"role": "user",
                             "content": format!("Write a long paragraph about {topic}.")}));
        send(json!({"type": "generate", "id": i, "messages": messages, "sampling": sampling}));
        let mut text = String::new();
        let t = until(&mut out, |v| {
            if v["id"] == i && v["type"] == "token" {
                text.push_str(v["text"].as_str().unwrap_or(""));
            }
            v["id"] == i && v["type"] == "turn"
        });
        assert_ne!(t["stop"], "error", "turn {i} failed");
        let (p, f, d) = (
            t["prompt_tokens"].as_u64().unwrap_or(0),
            t["prefill_tokens"].as_u64().unwrap_or(0),
            t["dropped"].as_u64().unwrap_or(0),
        );
        println!(
            "{i:>4}  {p:>6}  {f:>9}  {d:>7}  {:>6}  {}",
            t["n_past"], t["stop"]
        );
        prompts += p;
        prefilled += f;
        ms += t["prefill_ms"].as_f64().unwrap_or(0.0);
        if d > last {
            cuts += 1;
        }
        last = d;
        messages.push(json!({"role": "assistant", "content": text}));
    }
    println!(
        "cuts {cuts}; prefilled {prefilled} of {prompts} prompt tokens ({:.0}%; prefilling every \
         prompt whole: {prompts}); prefill {ms:.0} ms in all",
        100.0 * prefilled as f64 / prompts.max(1) as f64
    );
    drop(stdin);
    let _ = child.wait();
}
