//! Our token ids against an independent tokenizer (committed fixture written by
//! scripts/tok_reference.py: HF `tokenizers` for SmolLM2, Google `sentencepiece` for Gemma 3, both
//! built from the GGUF metadata) on the two real models, for hard strings, with and without BOS /
//! special-token parsing, plus the reference detokenization.

use serde_json::Value;
use strata::paths::{model_path, GEMMA3_ENV, SMOLLM2_ENV};
use strata::tokenizer::Tokenizer;

fn fixture() -> Value {
    let path = strata::paths::project_root().join("tests/fixtures/tokenizer/reference.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (generate it with scripts/tok_reference.py)",
            path.display()
        )
    });
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: bad JSON: {e}", path.display()))
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .expect("id list")
        .iter()
        .map(|x| x.as_u64().expect("id") as u32)
        .collect()
}

fn check(model_key: &str, env: &str) {
    let fx = fixture();
    let path = model_path(env).unwrap_or_else(|e| panic!("{e}"));
    let tok =
        Tokenizer::from_gguf_path(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let strings = fx["strings"].as_array().expect("strings");
    let cases = fx["models"][model_key]["cases"].as_array().expect("cases");
    assert_eq!(strings.len(), cases.len());
    println!("reference: {}", fx["tool"]);
    let mut failures = Vec::new();
    for (s, case) in strings.iter().zip(cases) {
        let s = s.as_str().expect("string");
        let plain = tok.encode(s, false, false);
        let special = tok.encode(s, true, true);
        if plain != ids(&case["plain"]) {
            failures.push(format!(
                "plain {s:?}:\n  ours {plain:?}\n  ref  {:?}",
                ids(&case["plain"])
            ));
        }
        if special != ids(&case["special"]) {
            failures.push(format!(
                "special {s:?}:\n  ours {special:?}\n  ref  {:?}",
                ids(&case["special"])
            ));
        }
        // llama.cpp's detokenize of the plain ids (control tokens hidden).
        let detok = tok.decode(&ids(&case["plain"]), false);
        if detok != case["detok_plain"].as_str().expect("detok") {
            failures.push(format!(
                "decode {s:?}: ours {detok:?} ref {:?}",
                case["detok_plain"]
            ));
        }
    }
    println!(
        "{model_key}: {} strings, {} mismatches",
        strings.len(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{model_key}: {} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn smollm2_matches_reference() {
    check("smollm2", SMOLLM2_ENV);
}

#[test]
fn gemma3_matches_reference() {
    check("gemma3", GEMMA3_ENV);
}
