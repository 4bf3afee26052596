//! The layer split on both real models: the CPU device split into two sub-device cards, the
//! layers split over them, gives BITWISE the logits of the whole device as one card — a prompt
//! (matmul rows over several prefill chunks), greedy decode steps, a speculative verify window of
//! 1 + 4 rows and a rollback into it — and reports two cards' memory. Also an uneven split, the
//! `strata run --split-cpu 2` text, and the errors of bad splits.

use std::process::Command;
use strata::gguf::Gguf;
use strata::model::layer_ranges;
use strata::model::{Engine, EngineOptions};
use strata::sycl::Card;
use strata::tokenizer::Tokenizer;

const MODELS: [(&str, &str); 2] = [
    ("SmolLM2-135M", strata::paths::SMOLLM2_ENV),
    ("Gemma3-270M", strata::paths::GEMMA3_ENV),
];

const OPTS: EngineOptions = EngineOptions {
    n_ctx: 256,
    // 16-row chunks: the prompt runs as matmul chunks plus an mmvq tail, each crossing cards.
    chunk: 16,
    act_round: true,
    keep_gguf: false,
};

fn open(name: &str, env: &str) -> (Gguf, Tokenizer) {
    let p = strata::paths::model_path(env).unwrap_or_else(|e| panic!("{name}: {e}"));
    let g = Gguf::open(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let tok = Tokenizer::from_gguf_path(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    (g, tok)
}

fn one_card(g: &Gguf) -> Engine {
    let card = Card::cpu().expect("the CPU SYCL device (run `make setup`)");
    Engine::from_gguf(g, card, &OPTS).expect("one-card load")
}

fn split(g: &Gguf, layers: Option<&[usize]>) -> Engine {
    let cards = Card::split_cpu(2).expect("the CPU device split into 2 sub-devices");
    Engine::from_gguf_split(g, cards, layers, &OPTS).expect("split load")
}

fn argmax(l: &[f32]) -> u32 {
    (0..l.len())
        .max_by(|&a, &b| l[a].total_cmp(&l[b]).then(b.cmp(&a)))
        .expect("non-empty logits") as u32
}

/// Compares logit rows bitwise; returns how many values were compared.
fn same(what: &str, a: &[Vec<f32>], b: &[Vec<f32>]) -> usize {
    assert_eq!(a.len(), b.len(), "{what}: row count");
    for (r, (x, y)) in a.iter().zip(b).enumerate() {
        assert_eq!(x.len(), y.len(), "{what}: row {r} length");
        if let Some(i) = (0..x.len()).find(|&i| x[i].to_bits() != y[i].to_bits()) {
            panic!(
                "{what}: row {r}, logit {i}: {} (split) vs {} (one card)",
                x[i], y[i]
            );
        }
    }
    a.iter().map(Vec::len).sum()
}

#[test]
fn split_over_two_cards_is_bitwise_one_card() {
    for (name, env) in MODELS {
        let (g, tok) = open(name, env);
        let mut one = one_card(&g);
        let mut two = split(&g, None);
        let n_layer = one.config().n_layer;
        assert_eq!(two.n_cards(), 2);
        let ranges = two.layer_split();
        assert_eq!(ranges, vec![0..n_layer / 2, n_layer / 2..n_layer]);

        let prompt = tok.encode(
            "The quick brown fox jumps over the lazy dog. Colours of the rainbow: red, orange, yellow, green, blue",
            true,
            false,
        );
        assert!(prompt.len() > 16, "{name}: the prompt must cross a chunk");
        let p = prompt.len();
        let rows: Vec<usize> = (0..p).collect();
        let lp = one.forward(&prompt, 0, &rows).unwrap();
        let mut n = same(
            &format!("{name} prompt"),
            &two.forward(&prompt, 0, &rows).unwrap(),
            &lp,
        );
        // greedy decode steps
        let mut next = argmax(&lp[p - 1]);
        let mut pos = p;
        let mut decoded = Vec::new();
        for _ in 0..4 {
            let a = two.forward(&[next], pos, &[0]).unwrap();
            let b = one.forward(&[next], pos, &[0]).unwrap();
            n += same(&format!("{name} decode at {pos}"), &a, &b);
            decoded.push(next);
            next = argmax(&b[0]);
            pos += 1;
        }
        // a --spec 4 verify window: the next token and 4 drafts (from the prompt), all rows
        let window: Vec<u32> = std::iter::once(next)
            .chain(prompt[1..5].iter().copied())
            .collect();
        let wrows: Vec<usize> = (0..window.len()).collect();
        n += same(
            &format!("{name} verify window at {pos}"),
            &two.forward(&window, pos, &wrows).unwrap(),
            &one.forward(&window, pos, &wrows).unwrap(),
        );
        // reject after the second row: roll back to pos + 2 and decode on from there
        n += same(
            &format!("{name} after rollback to {}", pos + 2),
            &two.forward(&[decoded[0]], pos + 2, &[0]).unwrap(),
            &one.forward(&[decoded[0]], pos + 2, &[0]).unwrap(),
        );
        println!(
            "{name}: split {ranges:?}: {n} logits bitwise equal to one card (prompt {p} rows, 4 decode steps, a 5-row verify window, a rollback)"
        );

        let m1 = one.memory();
        let m2 = two.memory();
        println!("{name}: one card {m1:?}\n{name}: split {m2:?}");
        assert_eq!(m2.len(), 2);
        for m in &m2 {
            assert!(
                m.weights > 0 && m.kv > 0 && m.scratch > 0,
                "{name}: every card holds weights, kv and scratch: {m:?}"
            );
        }
        assert_eq!(
            m2[0].kv + m2[1].kv,
            m1[0].kv,
            "{name}: the KV cache is split"
        );
        // tied head: the last card holds a copy of token_embd for the head
        let embd = g.tensor("token_embd.weight").unwrap();
        let embd_bytes = g.tensor_data(embd).unwrap().len();
        assert_eq!(
            m2[0].weights + m2[1].weights,
            m1[0].weights + embd_bytes,
            "{name}: weights split, plus the head's copy of the embedding"
        );
    }
}

#[test]
fn uneven_split_is_bitwise_one_card() {
    let (name, env) = MODELS[0];
    let (g, tok) = open(name, env);
    let n_layer = strata::model::ModelConfig::from_gguf(&g).unwrap().n_layer;
    let mut one = one_card(&g);
    let counts = [1, n_layer - 1];
    let mut two = split(&g, Some(&counts));
    assert_eq!(two.layer_split(), vec![0..1, 1..n_layer]);
    let prompt = tok.encode(
        "One layer on the first card, the rest on the second.",
        true,
        false,
    );
    let rows: Vec<usize> = (0..prompt.len()).collect();
    let n = same(
        "uneven split",
        &two.forward(&prompt, 0, &rows).unwrap(),
        &one.forward(&prompt, 0, &rows).unwrap(),
    );
    println!("{name}: split {counts:?}: {n} logits bitwise equal to one card");
}

#[test]
fn bad_splits_are_clear_errors() {
    for (counts, cards, want) in [
        (Some(vec![10, 10]), 2, "adding up to 30"),
        (Some(vec![0, 30]), 2, "at least 1"),
        (Some(vec![30]), 2, "need 2 counts"),
        (None, 31, "at least one layer"),
        (None, 0, "0 cards"),
    ] {
        let e = layer_ranges(30, cards, counts.as_deref()).unwrap_err();
        println!("{counts:?} over {cards}: {e}");
        assert!(e.to_string().contains(want), "{e}");
    }
    assert_eq!(
        layer_ranges(7, 3, None).unwrap(),
        vec![0..3, 3..5, 5..7],
        "remainder on the first cards"
    );
    // cards of two different contexts cannot share the kernels
    let (g, _) = open(MODELS[0].0, MODELS[0].1);
    let cards = vec![Card::cpu().unwrap(), Card::cpu().unwrap()];
    let e = Engine::from_gguf_split(&g, cards, None, &OPTS)
        .err()
        .expect("two contexts refused");
    println!("two contexts: {e}");
    assert!(e.to_string().contains("different SYCL contexts"), "{e}");
}

fn strata_run(extra: &[&str]) -> (String, String) {
    let model = strata::paths::model_path(strata::paths::SMOLLM2_ENV)
        .unwrap_or_else(|e| panic!("SmolLM2: {e}"));
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args([
            "run", "--chat", "--temp", "0", "-n", "32", "--ctx", "256", "--stats",
        ])
        .args(["-p", "Name three colours of the rainbow."])
        .arg("-m")
        .arg(&model)
        .args(extra)
        .output()
        .expect("running strata run");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "strata run {extra:?} failed: {err}");
    (String::from_utf8(out.stdout).expect("UTF-8 text"), err)
}

#[test]
fn strata_run_split_cpu_2_gives_the_same_text() {
    let (whole, _) = strata_run(&[]);
    let (two, stats) = strata_run(&["--split-cpu", "2"]);
    println!("whole: {whole:?}\nsplit: {two:?}\n{stats}");
    assert!(!whole.trim().is_empty());
    assert_eq!(two, whole, "greedy text through two cards");
    let devices: Vec<&str> = stats.lines().filter(|l| l.starts_with("device")).collect();
    assert_eq!(devices.len(), 2, "--stats shows two cards: {stats}");
    let (spec_text, spec) = strata_run(&["--split-cpu", "2", "--spec", "4"]);
    println!("split, --spec 4: {spec_text:?}\n{spec}");
    assert_eq!(
        spec_text, whole,
        "greedy text through two cards with --spec 4"
    );
}
