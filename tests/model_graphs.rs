//! Recorded decode steps (SYCL graphs, `Engine::set_step_graphs`) on both real models: the same
//! sequence of forwards — a prompt, one-row decode steps, a verify window with every row's
//! logits, a rollback, a window asking for one inner row (the head outside the graph) — gives
//! bitwise the same logits replayed from graphs as submitted launch by launch.
mod spec_support;
use spec_support::*;
use strata::model::Engine;

/// (tokens, start position, rows wanted) of each forward, after a prompt of `p` tokens.
fn script(prompt: &[u32], next: &[u32]) -> Vec<(Vec<u32>, usize, Vec<usize>)> {
    let p = prompt.len();
    let mut s = vec![(prompt.to_vec(), 0, vec![p - 1])];
    for (i, &t) in next[..6].iter().enumerate() {
        s.push((vec![t], p + i, vec![0]));
    }
    // a verify window of 5 rows at p + 6, all rows, then a rollback of 3
    s.push((next[6..11].to_vec(), p + 6, (0..5).collect()));
    s.push((vec![next[11]], p + 8, vec![0]));
    // a window whose logits are wanted for one inner row only
    s.push((next[12..16].to_vec(), p + 9, vec![2]));
    s.push((vec![next[16]], p + 13, vec![0]));
    s
}

fn run(e: &mut Engine, steps: &[(Vec<u32>, usize, Vec<usize>)]) -> Vec<Vec<Vec<f32>>> {
    e.reset();
    steps
        .iter()
        .map(|(toks, at, want)| e.forward(toks, *at, want).expect("forward"))
        .collect()
}

#[test]
fn graph_replay_is_bitwise_direct_submission() {
    for (name, env, chat) in MODELS {
        let mut m = load(name, env, chat, 256);
        let prompt = m.prompt("Name the planets of the solar system, in order.");
        let next = m.prompt(
            "Mercury, Venus, Earth, Mars, Jupiter, Saturn, Uranus and Neptune, then the dwarf planets Ceres, Pluto and Eris.",
        );
        assert!(next.len() >= 17, "{name}: continuation too short");
        let steps = script(&prompt, &next);
        let e = m.gen.engine_mut();

        e.set_step_graphs(true);
        let replayed = run(e, &steps);
        let graphs = e.step_graphs();
        // one-row steps, the 5-row window with its head, the 4-row window without
        assert!(
            graphs >= 3,
            "{name}: only {graphs} step graphs recorded: the graph path did not run"
        );
        e.set_step_graphs(false);
        let direct = run(e, &steps);
        assert_eq!(e.step_graphs(), 0, "{name}: graphs recorded while off");

        let mut n = 0;
        for (si, (a, b)) in replayed.iter().zip(&direct).enumerate() {
            assert_eq!(a.len(), b.len(), "{name}: step {si}: row count");
            for (r, (x, y)) in a.iter().zip(b).enumerate() {
                if let Some(i) = (0..x.len()).find(|&i| x[i].to_bits() != y[i].to_bits()) {
                    panic!(
                        "{name}: step {si} row {r}: logit {i} is {} replayed vs {} direct",
                        x[i], y[i]
                    );
                }
                n += 1;
            }
        }
        println!(
            "{name}: {} forwards, {n} logits rows bitwise equal with and without {graphs} recorded step graphs",
            steps.len()
        );
    }
}
