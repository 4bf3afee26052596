//! Speculation never changes greedy output: `spec 4` (n-gram drafter) produces token for token
//! what `spec 0` produces, on both real models, for chat prompts and repetitive ones; the
//! acceptance figures are printed. Also: the metrics add up, and a cancelled turn stops.
mod spec_support;
use spec_support::*;
use std::sync::atomic::{AtomicBool, Ordering};
use strata::generate::{GenSink, StopReason, TokenText, WindowStats};
use strata::spec::NgramDrafter;

const MAX_TOKENS: usize = 48;

#[test]
fn spec4_greedy_output_equals_spec0() {
    for (name, env, chat) in MODELS {
        let mut m = load(name, env, chat, 1024);
        m.gen.set_drafter(Some(Box::new(NgramDrafter::default())));
        let mut total = (0u32, 0u32);
        for text in PROMPTS.iter().chain(REPETITIVE.iter()) {
            let prompt = m.prompt(text);
            let base = m.run(&prompt, &m.config(0, MAX_TOKENS));
            let spec = m.run(&prompt, &m.config(4, MAX_TOKENS));
            assert_eq!(base.proposed, 0);
            assert_eq!(
                base.windows as usize,
                base.tokens.len() - 1,
                "{name}: spec 0 is one window per token after the first"
            );
            let shown: String = m.tok.decode(&base.tokens, false).chars().take(60).collect();
            println!(
                "{name}: {:>2} tokens, spec 0 {} windows, spec 4 {} windows, proposed {}, accepted {} (acceptance {:.2}, mean accepted {:.2}, {:.2} tokens/window) {:?}",
                base.tokens.len(),
                base.windows,
                spec.windows,
                spec.proposed,
                spec.accepted,
                spec.acceptance,
                spec.mean_accepted_len,
                spec.tokens_per_window,
                shown
            );
            assert_eq!(
                spec.tokens, base.tokens,
                "{name}: --spec 4 changed the greedy output for {text:?}"
            );
            assert_eq!(spec.stop, base.stop);
            total.0 += spec.proposed;
            total.1 += spec.accepted;
        }
        println!(
            "{name}: all prompts: {} proposed, {} accepted",
            total.0, total.1
        );
    }
}

/// Collects the windows and the text a turn streams.
#[derive(Default)]
struct Record {
    windows: Vec<WindowStats>,
    text: String,
    ids: Vec<u32>,
}

impl GenSink for Record {
    fn text(&mut self, piece: &str) {
        self.text.push_str(piece);
    }
    fn tokens(&mut self, ids: &[u32]) {
        self.ids.extend_from_slice(ids);
    }
    fn window(&mut self, w: &WindowStats) {
        self.windows.push(w.clone());
    }
}

#[test]
fn turn_metrics_are_the_sums_of_the_windows() {
    let (name, env, chat) = MODELS[0];
    let mut m = load(name, env, chat, 1024);
    m.gen.set_drafter(Some(Box::new(NgramDrafter::default())));
    let prompt = m.prompt(REPETITIVE[1]);
    let cfg = m.config(4, 40);
    let mut rec = Record::default();
    let mut dec = TokenText::new(&m.tok);
    m.gen.forget();
    let s = m
        .gen
        .generate(&prompt, &cfg, &mut dec, &mut rec, &AtomicBool::new(false))
        .unwrap();
    println!("{name}: {s:?}");
    assert_eq!(
        rec.ids, s.tokens,
        "the sink saw every generated token, in order"
    );
    let visible: Vec<u32> = s
        .tokens
        .iter()
        .copied()
        .filter(|t| !m.stop_ids.contains(t))
        .collect();
    assert_eq!(
        rec.text,
        m.tok.decode(&visible, false),
        "streamed text == decoding the tokens"
    );
    assert_eq!(s.windows as usize, rec.windows.len());
    assert_eq!(
        s.proposed,
        rec.windows.iter().map(|w| w.proposed).sum::<u32>()
    );
    assert_eq!(
        s.accepted,
        rec.windows.iter().map(|w| w.accepted).sum::<u32>()
    );
    assert!(rec
        .windows
        .iter()
        .all(|w| w.t == w.proposed + 1 && w.accepted <= w.proposed && w.ms > 0.0));
    assert_eq!(s.decode_tokens as usize, s.tokens.len() - 1);
    assert_eq!(s.prefill_tokens as usize, prompt.len());
    let verify: f64 = rec.windows.iter().map(|w| w.ms).sum();
    assert!((s.verify_ms - verify).abs() < 1e-6 && s.decode_ms >= s.verify_ms);
    assert!(s.ttft_ms >= s.prefill_ms);
    // every window keeps accepted + 1 tokens unless the turn ended inside it
    let kept: u32 = rec.windows.iter().map(|w| w.accepted + 1).sum();
    assert!(
        kept >= s.decode_tokens && kept - s.decode_tokens <= 4,
        "{kept} vs {}",
        s.decode_tokens
    );
    let d = &m.gen.devices()[0];
    println!(
        "{name}: device {} weights {} kv {} scratch {} of budget {}",
        d.memory.device, d.memory.weights, d.memory.kv, d.memory.scratch, d.budget
    );
    assert!(
        d.memory.weights > 50_000_000 && d.memory.kv > 0 && d.memory.total() as u64 <= d.budget
    );
}

/// Cancels from the sink after the second window: the turn ends there with `Cancelled`.
struct CancelAfter<'a> {
    flag: &'a AtomicBool,
    seen: usize,
}

impl GenSink for CancelAfter<'_> {
    fn window(&mut self, _w: &WindowStats) {
        self.seen += 1;
        if self.seen == 2 {
            self.flag.store(true, Ordering::Relaxed);
        }
    }
}

#[test]
fn cancel_stops_between_windows_and_the_next_turn_reuses_the_cache() {
    let (name, env, chat) = MODELS[0];
    let mut m = load(name, env, chat, 1024);
    let prompt = m.prompt(PROMPTS[0]);
    let flag = AtomicBool::new(false);
    let mut sink = CancelAfter {
        flag: &flag,
        seen: 0,
    };
    let mut dec = TokenText::new(&m.tok);
    let cfg = m.config(0, 40);
    let s = m
        .gen
        .generate(&prompt, &cfg, &mut dec, &mut sink, &flag)
        .unwrap();
    assert_eq!(s.stop, StopReason::Cancelled);
    assert_eq!(s.windows, 2, "{name}: no window after the cancel");
    // the next turn extends the first: with prefix reuse only the new tokens are prefilled
    let mut longer = prompt.clone();
    longer.extend_from_slice(&s.tokens);
    let reuse = strata::generate::GenerateConfig {
        reuse_prefix: true,
        ..cfg.clone()
    };
    let r = m.next_turn(&longer, &reuse);
    println!(
        "{name}: cancelled after {} tokens; the next turn reused {} cached tokens and prefilled {}",
        s.tokens.len(),
        r.cached_tokens,
        r.prefill_tokens
    );
    assert_eq!(r.cached_tokens as usize, prompt.len() + s.tokens.len() - 1);
    assert_eq!(r.prefill_tokens, 1);
}

#[test]
fn max_tokens_0_evaluates_the_prompt_and_generates_nothing() {
    let (name, env, chat) = MODELS[0];
    let mut m = load(name, env, chat, 1024);
    let prompt = m.prompt(PROMPTS[0]);
    let cfg = strata::generate::GenerateConfig {
        reuse_prefix: true,
        ..m.config(0, 0)
    };
    let s = m.next_turn(&prompt, &cfg);
    println!(
        "{name}: max_tokens 0: {} tokens out, {} prefilled, stop {:?}",
        s.tokens.len(),
        s.prefill_tokens,
        s.stop
    );
    assert!(s.tokens.is_empty());
    assert_eq!((s.decode_tokens, s.windows), (0, 0));
    assert_eq!(s.stop, StopReason::MaxTokens);
    assert_eq!(s.prefill_tokens as usize, prompt.len());
    // the prompt stays cached: the next turn over it prefills only its last token
    let r = m.next_turn(
        &prompt,
        &strata::generate::GenerateConfig {
            reuse_prefix: true,
            ..m.config(0, 4)
        },
    );
    assert_eq!(r.cached_tokens as usize, prompt.len() - 1);
    assert_eq!(r.tokens.len(), 4);
}
