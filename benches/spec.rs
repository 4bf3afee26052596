//! Speculative decoding with the n-gram drafter on repetitive prompts: decode tok/s and ms per
//! window with and without `--spec`, the acceptance, and the check that the greedy output is the
//! same. Median of 3 turns per setting (the first turn of each model warms the kernel cache and
//! is not counted). `cargo bench --bench spec [-- --tokens N --spec N]`.

use std::sync::atomic::AtomicBool;
use strata::generate::{GenerateConfig, Generator, NullSink, TokenText, TurnStats};
use strata::model::{Engine, EngineOptions};
use strata::spec::NgramDrafter;
use strata::sycl::Card;
use strata::tokenizer::{ChatMessage, ChatTemplate, Tokenizer};

const PROMPTS: [(&str, &str); 2] = [
    ("code", "Rewrite this Python function with the variable `total_count` renamed to `n_items`, and print the whole function:\n\ndef summarize(records):\n    total_count = 0\n    for record in records:\n        if record.is_valid():\n            total_count = total_count + 1\n            print(record.name, total_count)\n    print('total_count =', total_count)\n    return total_count\n"),
    ("list", "Repeat this list exactly, one item per line:\n1. apples\n2. bananas\n3. cherries\n4. dates\n5. elderberries\n6. figs\n7. grapes\n8. honeydew\n"),
];

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn arg(name: &str, default: usize) -> usize {
    let a: Vec<String> = std::env::args().collect();
    a.iter()
        .position(|x| x == name)
        .and_then(|i| a.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    strata::sycl::runtime::init();
    let n_tokens = arg("--tokens", 96);
    let spec = arg("--spec", 4);
    for (name, env, chat) in [
        ("SmolLM2-135M", strata::paths::SMOLLM2_ENV, true),
        ("Gemma3-270M", strata::paths::GEMMA3_ENV, false),
    ] {
        let path = strata::paths::model_path(env).unwrap_or_else(|e| panic!("{name}: {e}"));
        let tok = Tokenizer::from_gguf_path(&path).expect("tokenizer");
        let card = Card::cpu().expect("the SYCL CPU device");
        let budget = card.device.info().map(|i| i.global_mem).unwrap_or(0);
        let engine = Engine::load(
            &path,
            card,
            &EngineOptions {
                n_ctx: 1024,
                ..EngineOptions::default()
            },
        )
        .expect("model");
        let mut gen = Generator::new(engine, Some(Box::new(NgramDrafter::default())), budget);
        let tmpl = ChatTemplate::from_tokenizer(&tok);
        let stop_ids = tmpl.render(&[ChatMessage::new("user", "x")], true).stop_ids;
        for (kind, text) in PROMPTS {
            let prompt = if chat {
                tok.encode_prompt(&tmpl.render(&[ChatMessage::new("user", text)], true).prompt)
            } else {
                tok.encode(text, true, false)
            };
            let mut turn = |spec: usize| -> TurnStats {
                let cfg = GenerateConfig {
                    spec,
                    max_tokens: n_tokens,
                    stop_tokens: stop_ids.clone(),
                    ..GenerateConfig::default()
                };
                gen.forget();
                gen.generate(
                    &prompt,
                    &cfg,
                    &mut TokenText::new(&tok),
                    &mut NullSink,
                    &AtomicBool::new(false),
                )
                .expect("generate")
            };
            turn(0); // warm-up
            let base: Vec<TurnStats> = (0..3).map(|_| turn(0)).collect();
            let fast: Vec<TurnStats> = (0..3).map(|_| turn(spec)).collect();
            let same = fast.iter().all(|s| s.tokens == base[0].tokens);
            let tps = |v: &[TurnStats]| median(v.iter().map(|s| s.decode_tps).collect());
            let wms = |v: &[TurnStats]| {
                median(
                    v.iter()
                        .map(|s| s.verify_ms / s.windows.max(1) as f64)
                        .collect(),
                )
            };
            let f = &fast[0];
            println!(
                "{name} {kind:4}: {} tokens | spec 0: {:6.1} tok/s, {:5.1} ms/window | spec {spec}: {:6.1} tok/s, {:5.1} ms/window, {} windows, {:.2} tokens/window, acceptance {}/{} = {:.2}, mean accepted {:.2} | speed-up x{:.2} | same output: {same}",
                base[0].tokens.len(),
                tps(&base),
                wms(&base),
                tps(&fast),
                wms(&fast),
                f.windows,
                f.tokens_per_window,
                f.accepted,
                f.proposed,
                f.acceptance,
                f.mean_accepted_len,
                tps(&fast) / tps(&base),
            );
        }
    }
}
