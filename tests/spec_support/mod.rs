//! Shared by the speculative-decoding tests: the real models on the real CPU device, their
//! tokenizers and chat templates, and a few prompts (chat and repetitive).
#![allow(dead_code)]

use std::sync::atomic::AtomicBool;
use strata::generate::{GenerateConfig, Generator, NullSink, TokenText, TurnStats};
use strata::model::{Engine, EngineOptions};
use strata::sycl::Card;
use strata::tokenizer::{ChatMessage, ChatTemplate, Tokenizer};

pub struct Model {
    pub name: &'static str,
    pub tok: Tokenizer,
    pub gen: Generator,
    /// SmolLM2 is an instruct model (prompts go through its chat template); Gemma 3 270M is a
    /// base model (plain text).
    pub chat: bool,
    pub stop_ids: Vec<u32>,
}

pub const MODELS: [(&str, &str, bool); 2] = [
    ("SmolLM2-135M", strata::paths::SMOLLM2_ENV, true),
    ("Gemma3-270M", strata::paths::GEMMA3_ENV, false),
];

pub fn load(name: &'static str, env: &str, chat: bool, n_ctx: usize) -> Model {
    let path = strata::paths::model_path(env).unwrap_or_else(|e| panic!("{name}: {e}"));
    let tok = Tokenizer::from_gguf_path(&path)
        .unwrap_or_else(|e| panic!("{}: tokenizer: {e}", path.display()));
    let card = Card::cpu().expect("the SYCL CPU device (run `make setup`)");
    let budget = card.device.info().expect("device info").global_mem;
    let engine = Engine::load(
        &path,
        card,
        &EngineOptions {
            n_ctx,
            chunk: 64,
            ..EngineOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let stop_ids = ChatTemplate::from_tokenizer(&tok)
        .render(&[ChatMessage::new("user", "x")], true)
        .stop_ids;
    Model {
        name,
        tok,
        gen: Generator::new(engine, None, budget),
        chat,
        stop_ids,
    }
}

impl Model {
    pub fn prompt(&self, text: &str) -> Vec<u32> {
        if self.chat {
            let r = ChatTemplate::from_tokenizer(&self.tok)
                .render(&[ChatMessage::new("user", text)], true);
            self.tok.encode_prompt(&r.prompt)
        } else {
            self.tok.encode(text, true, false)
        }
    }

    pub fn config(&self, spec: usize, max_tokens: usize) -> GenerateConfig {
        GenerateConfig {
            spec,
            max_tokens,
            stop_tokens: self.stop_ids.clone(),
            ..GenerateConfig::default()
        }
    }

    /// One turn from a fresh cache, greedy unless `cfg` says otherwise.
    pub fn run(&mut self, prompt: &[u32], cfg: &GenerateConfig) -> TurnStats {
        self.gen.forget();
        self.next_turn(prompt, cfg)
    }

    /// One turn on the cache as the last turn left it (`cfg.reuse_prefix` decides its use).
    pub fn next_turn(&mut self, prompt: &[u32], cfg: &GenerateConfig) -> TurnStats {
        let mut dec = TokenText::new(&self.tok);
        self.gen
            .generate(
                prompt,
                cfg,
                &mut dec,
                &mut NullSink,
                &AtomicBool::new(false),
            )
            .unwrap_or_else(|e| panic!("{}: generate: {e}", self.name))
    }
}

/// Chat prompts of different kinds, and two repetitive ones (code with repeated identifiers,
/// a list), where prompt lookup has something to find.
pub const PROMPTS: [&str; 3] = [
    "What is the capital of France? Answer in one sentence.",
    "Write a short poem about the sea.",
    "Explain what a hash map is.",
];

pub const REPETITIVE: [&str; 2] = [
    "Rewrite this Python function with the variable `total_count` renamed to `n_items`, and print the whole function:\n\ndef summarize(records):\n    total_count = 0\n    for record in records:\n        if record.is_valid():\n            total_count = total_count + 1\n            print(record.name, total_count)\n    print('total_count =', total_count)\n    return total_count\n",
    "Repeat this list exactly, one item per line:\n1. apples\n2. bananas\n3. cherries\n4. dates\n5. elderberries\n6. figs\n7. grapes\n8. honeydew\n",
];
