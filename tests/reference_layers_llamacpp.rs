//! Gemma 3 layer by layer against llama.cpp (issue 28): the f64 reference's residual-stream
//! states on one prompt (`RefSession::trace`) beside llama-eval-callback's dumps of the same
//! tensors for llama.cpp's default, `-fa off` and `-nr` (tests/data/layers/gemma3_capital.json,
//! made by scripts/evalcb_layers.py). Per tensor: the difference of the sums and the largest
//! difference of the printed values (first and last 3 of each token's row, 4 decimals), each
//! relative to the tensor's largest printed magnitude, for the reference and for llama.cpp's
//! own other paths against its default. The table is docs/kld.md's per-layer comparison: where
//! the paths part and how fast the gap grows.

use serde_json::Value;
use strata::gguf::Gguf;
use strata::reference::{RefModel, RefSession, Rounding};

const DATA: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/layers/gemma3_capital.json"
);

/// A tensor's rows as llama-eval-callback prints them: the first and last 3 values of each
/// token's row, and the sum over all of them.
struct Printed {
    rows: Vec<Vec<f64>>,
    sum: f64,
}

fn printed(t: &Value) -> Printed {
    let rows = t["values"]
        .as_array()
        .expect("values")
        .iter()
        .map(|r| {
            r.as_array()
                .expect("a row")
                .iter()
                .map(|v| v.as_f64().expect("a number"))
                .collect()
        })
        .collect();
    Printed {
        rows,
        sum: t["sum"].as_f64().expect("sum"),
    }
}

/// The reference's tensor as llama-eval-callback would print it: the last `rows` tokens'
/// states, 3 first and 3 last values of each.
fn ours(states: &[Vec<f32>], rows: usize) -> Printed {
    let keep = &states[states.len() - rows..];
    let rows = keep
        .iter()
        .map(|v| {
            let n = v.len();
            [0, 1, 2, n - 3, n - 2, n - 1]
                .iter()
                .map(|&i| v[i] as f64)
                .collect()
        })
        .collect();
    let sum = keep.iter().flatten().map(|&x| x as f64).sum();
    Printed { rows, sum }
}

/// (|sum a - sum b|, max |a - b| over the printed values), both over the largest printed
/// magnitude of `b`.
fn distance(a: &Printed, b: &Printed) -> (f64, f64) {
    let scale = b
        .rows
        .iter()
        .flatten()
        .fold(1e-6f64, |m, &v| m.max(v.abs()));
    let dv = a
        .rows
        .iter()
        .flatten()
        .zip(b.rows.iter().flatten())
        .fold(0f64, |m, (x, y)| m.max((x - y).abs()));
    ((a.sum - b.sum).abs() / scale, dv / scale)
}

#[test]
fn gemma3_layers_beside_llama_cpp() {
    let data: Value =
        serde_json::from_str(&std::fs::read_to_string(DATA).expect("the data file")).expect("JSON");
    let path = strata::paths::model_path(data["model_env"].as_str().expect("model_env"))
        .unwrap_or_else(|e| panic!("{e}"));
    let g = Gguf::open(&path).expect("open the model");
    let model = RefModel::load_with(&g, Rounding::LlamaCpu).expect("the reference");
    let tok = strata::tokenizer::Tokenizer::from_gguf_path(&path).expect("the tokenizer");
    let ids = tok.encode(data["prompt"].as_str().expect("prompt"), true, false);
    let mut s = RefSession::new(&model, 64);
    s.trace = Some(Vec::new());
    s.forward(&ids, 0).expect("the reference forward");
    let trace = s.trace.take().expect("the trace");
    let mut by_name: std::collections::HashMap<&str, Vec<Vec<f32>>> = Default::default();
    for (name, v) in &trace {
        by_name.entry(name.as_str()).or_default().push(v.clone());
    }
    let variants = &data["variants"];
    let base = &variants["default"]["tensors"];
    let mut names: Vec<String> = vec!["inp_scaled".into()];
    for il in 0..model.cfg.n_layer {
        for n in ["attn_norm", "sa_out", "ffn_norm", "l_out"] {
            names.push(format!("{n}-{il}"));
        }
    }
    names.push("result_norm".into());
    println!(
        "{:<14} {:>21} {:>21} {:>21}",
        "tensor", "reference (sum, max)", "-fa off", "-nr"
    );
    let mut worst_ref = 0f64;
    let mut worst_own = 0f64;
    for name in &names {
        let b = &base[name.as_str()];
        let theirs = printed(b);
        let rows = b["rows"].as_u64().expect("rows") as usize;
        let states = by_name
            .get(name.as_str())
            .unwrap_or_else(|| panic!("the reference traced no {name}"));
        assert_eq!(states.len(), ids.len(), "{name}: one state per token");
        let r = distance(&ours(states, rows), &theirs);
        let fa = distance(
            &printed(&variants["fa_off"]["tensors"][name.as_str()]),
            &theirs,
        );
        let nr = distance(
            &printed(&variants["no_repack"]["tensors"][name.as_str()]),
            &theirs,
        );
        println!(
            "{name:<14} {:>10.2e} {:>10.2e} {:>10.2e} {:>10.2e} {:>10.2e} {:>10.2e}",
            r.0, r.1, fa.0, fa.1, nr.0, nr.1
        );
        worst_ref = worst_ref.max(r.1);
        worst_own = worst_own.max(fa.1).max(nr.1);
    }
    println!("largest printed-value gap: reference {worst_ref:.2e}, llama.cpp's own paths {worst_own:.2e}");
    // The embedding row and its scale are exact but for f32 rounding and the 4 printed decimals.
    let e = distance(
        &ours(
            &by_name["inp_scaled"],
            base["inp_scaled"]["rows"].as_u64().unwrap_or(1) as usize,
        ),
        &printed(&base["inp_scaled"]),
    );
    assert!(e.1 < 1e-3, "inp_scaled differs: {e:?}");
    // Layer by layer the reference stays as near llama.cpp as llama.cpp's own paths stay to
    // each other, within a factor for the 6 printed values' luck.
    assert!(
        worst_ref <= 4.0 * worst_own.max(1e-3),
        "reference {worst_ref:.2e} vs llama.cpp's own spread {worst_own:.2e}"
    );
}
