//! Tokenizer throughput on the two real models: encode a ~32k-token mixed text (prose, code,
//! numbers, CJK, emoji; deterministic), median of 7 runs; plus load time and decode speed.
//! Run: `cargo bench --bench tokenize` (prints figures; no pass/fail).

use std::time::{Duration, Instant};

use strata::paths::{model_path, GEMMA3_ENV, SMOLLM2_ENV};
use strata::tokenizer::{StreamDecoder, Tokenizer};

/// `varied`: words of random letters (few repeats, so the per-word cache rarely helps); else
/// words drawn from a fixed list (a realistic amount of repetition).
fn bench_text(target_tokens: usize, tok: &Tokenizer, varied: bool) -> String {
    let alphabet: Vec<char> = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJéüßжλ日本語😀0123456789.,-"
        .chars()
        .collect();
    let words = [
        "the",
        "model",
        "reads",
        "tokens",
        "and",
        "writes",
        "answers",
        "quickly",
        "über",
        "naïve",
        "日本語",
        "テキスト",
        "😀",
        "👍🏽",
        "fn",
        "main()",
        "{",
        "}",
        "let",
        "x",
        "=",
        "42;",
        "3.14159",
        "2024-11-29",
        "don't",
        "we'll",
        "Привет",
        "мир",
        "λ",
        "->",
        "==",
        "    ",
        "\n",
        "\t",
        "résumé",
        "co-operate",
        "HTTP/1.1",
        "<div>",
        "</div>",
    ];
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut text = String::new();
    // Grow in chunks, re-counting, until the text has at least the target number of tokens.
    while tok.encode(&text, false, false).len() < target_tokens {
        for _ in 0..2000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            if varied {
                let len = 2 + (state >> 8) % 8;
                for k in 0..len {
                    text.push(alphabet[((state >> (12 + 3 * k)) % alphabet.len() as u64) as usize]);
                }
            } else {
                text.push_str(words[(state % words.len() as u64) as usize]);
            }
            text.push(if state % 11 == 0 { '\n' } else { ' ' });
        }
    }
    text
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    for (name, env) in [
        ("SmolLM2-135M (gpt2 BPE)", SMOLLM2_ENV),
        ("Gemma-3-270M (llama SPM)", GEMMA3_ENV),
    ] {
        let path = match model_path(env) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        };
        let t = Instant::now();
        let tok = match Tokenizer::from_gguf_path(&path) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("{}: {e}", path.display());
                std::process::exit(1);
            }
        };
        let load = t.elapsed();
        for varied in [false, true] {
            let text = bench_text(32_768, &tok, varied);
            let mut n = 0;
            let runs: Vec<Duration> = (0..7)
                .map(|_| {
                    let t = Instant::now();
                    n = tok.encode(&text, true, false).len();
                    t.elapsed()
                })
                .collect();
            let enc = median(runs);
            let ids = tok.encode(&text, true, false);
            let runs: Vec<Duration> = (0..7)
                .map(|_| {
                    let t = Instant::now();
                    let mut d = StreamDecoder::new(false);
                    let mut out = String::new();
                    for &id in &ids {
                        out.push_str(&d.push(&tok, id));
                    }
                    out.push_str(&d.flush());
                    std::hint::black_box(out);
                    t.elapsed()
                })
                .collect();
            let dec = median(runs);
            println!(
            "{name} [{}]: load {:.0} ms | encode {} tokens ({} bytes) in {:.1} ms = {:.0} tokens/s | stream-decode {:.1} ms = {:.0} tokens/s",
            if varied { "random words" } else { "word-list text" },
            load.as_secs_f64() * 1e3,
            n,
            text.len(),
            enc.as_secs_f64() * 1e3,
            n as f64 / enc.as_secs_f64(),
            dec.as_secs_f64() * 1e3,
            ids.len() as f64 / dec.as_secs_f64(),
        );
        }
    }
}
