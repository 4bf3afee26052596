//! Round trips and streaming decode on the real models' vocabularies.

use strata::paths::{model_path, GEMMA3_ENV, SMOLLM2_ENV};
use strata::tokenizer::{StreamDecoder, Tokenizer};

fn load(env: &str) -> Tokenizer {
    let path = model_path(env).unwrap_or_else(|e| panic!("{e}"));
    Tokenizer::from_gguf_path(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn strings() -> Vec<String> {
    let path = strata::paths::project_root().join("tests/fixtures/tokenizer/strings.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn round_trip(env: &str) {
    let tok = load(env);
    for s in strings() {
        // Plain text (control-token text stays text) decodes back exactly: both models have
        // add_space_prefix = false and byte fallback / byte-level BPE, so nothing is lossy.
        let ids = tok.encode(&s, false, false);
        assert_eq!(tok.decode(&ids, false), s, "{env}: {s:?} -> {ids:?}");
        // With special tokens parsed, they decode back to their text only when rendered.
        let ids = tok.encode(&s, false, true);
        assert_eq!(tok.decode(&ids, true), s, "{env} (special): {s:?}");
        // Streaming, one token at a time, gives the same text, and never a partial char.
        let mut d = StreamDecoder::new(true);
        let mut streamed = String::new();
        for &id in &ids {
            let part = d.push(&tok, id);
            streamed.push_str(&part);
        }
        streamed.push_str(&d.flush());
        assert_eq!(streamed, s, "{env} (stream): {s:?}");
    }
}

#[test]
fn smollm2_round_trip() {
    round_trip(SMOLLM2_ENV);
}

#[test]
fn gemma3_round_trip() {
    round_trip(GEMMA3_ENV);
}

#[test]
fn emoji_split_across_byte_tokens_is_emitted_once() {
    // Gemma spells a rare emoji with <0xXX> byte tokens; SmolLM2 with byte-level pieces.
    for env in [GEMMA3_ENV, SMOLLM2_ENV] {
        let tok = load(env);
        let s = "🜁 alchemical air";
        let ids = tok.encode(s, false, false);
        let mut d = StreamDecoder::new(false);
        let parts: Vec<String> = ids.iter().map(|&id| d.push(&tok, id)).collect();
        let non_empty: Vec<&String> = parts.iter().filter(|p| !p.is_empty()).collect();
        assert!(
            parts.iter().all(|p| !p.contains('\u{FFFD}')),
            "{env}: {parts:?}"
        );
        assert_eq!(
            non_empty.first().map(|s| s.as_str()).unwrap_or(""),
            "🜁",
            "{env}: {parts:?} from {ids:?}"
        );
        assert!(
            ids.len() > non_empty.len(),
            "{env}: expected the emoji to span several tokens: {ids:?}"
        );
    }
}

#[test]
fn special_flags_and_ids() {
    let smol = load(SMOLLM2_ENV);
    let gemma = load(GEMMA3_ENV);
    // Ids as the GGUF metadata declares them (checked with the gguf package); EOT found by text.
    assert_eq!(
        (smol.bos(), smol.eos(), smol.eot()),
        (Some(1), Some(2), Some(2))
    );
    assert_eq!(
        (gemma.bos(), gemma.eos(), gemma.eot()),
        (Some(2), Some(1), gemma.token_id("<end_of_turn>"))
    );
    assert!(gemma.is_eog(1) && gemma.is_eog(106) && smol.is_eog(2) && smol.is_eog(0));
    // add_bos: Gemma yes, SmolLM2 no.
    assert_eq!(gemma.encode("hi", true, false).first(), Some(&2));
    assert_ne!(smol.encode("hi", true, false).first(), Some(&1));
    assert_eq!(gemma.encode("", true, false), vec![2]);
    assert!(smol.encode("", true, true).is_empty());
    // parse_special decides whether control-token text becomes the control token.
    let im = smol
        .token_id("<|im_start|>")
        .expect("<|im_start|> in vocab");
    assert_eq!(smol.encode("<|im_start|>", false, true), vec![im]);
    assert!(!smol.encode("<|im_start|>", false, false).contains(&im));
    // Out-of-range ids decode to U+FFFD, never a panic.
    assert_eq!(smol.decode(&[u32::MAX], false), "\u{FFFD}");
}
