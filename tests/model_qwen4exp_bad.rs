//! qwen4exp files with a required key or tensor missing, a wrong shape, or a value the engine
//! (and llama.cpp) cannot run: one clear error each, naming the key or the tensor (issue 25).
//! The files are the synthetic writer's tiny geometry, rewritten in memory.

use strata::gguf::{Array, Gguf, GgufWriter, Value};
use strata::model::ModelConfig;
use strata::synth::{to_bytes, SynthGeometry};

fn tiny() -> Gguf {
    let g = SynthGeometry::preset("tiny").expect("the tiny preset");
    Gguf::from_bytes(to_bytes(&g).expect("synth")).expect("a valid file")
}

/// `g` rewritten: `keys` replaced (None: dropped), tensor `drop` left out, tensor `dims`
/// re-declared with other dims of the same element count.
fn rewrite(
    g: &Gguf,
    keys: &[(&str, Option<Value>)],
    drop: Option<&str>,
    dims: Option<(&str, Vec<u64>)>,
) -> Gguf {
    let mut w = GgufWriter::new();
    for (k, v) in g.metadata() {
        if k == "general.alignment" || keys.iter().any(|(key, _)| *key == k) {
            continue;
        }
        w.set(k, v.clone()).expect("copy key");
    }
    for (k, v) in keys {
        if let Some(v) = v {
            w.set(*k, v.clone()).expect("set key");
        }
    }
    for t in g.tensors() {
        if Some(t.name.as_str()) == drop {
            continue;
        }
        let d = match &dims {
            Some((name, d)) if *name == t.name => d.clone(),
            _ => t.dims.clone(),
        };
        let data = g.tensor_data(t).expect("data").to_vec();
        w.add_tensor(t.name.clone(), &d, t.ggml_type, data)
            .expect("copy tensor");
    }
    Gguf::from_bytes(w.to_bytes().expect("bytes")).expect("rewritten file parses")
}

fn error(g: &Gguf) -> String {
    match ModelConfig::from_gguf(g) {
        Ok(_) => panic!("accepted"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn the_tiny_file_loads_as_written() {
    let c = ModelConfig::from_gguf(&tiny()).expect("the synthetic file is valid");
    assert_eq!(c.residual.streams(), 4);
    assert_eq!(c.n_layer, 2);
}

#[test]
fn each_required_key_missing_is_an_error_naming_it() {
    let g = tiny();
    let required = [
        "qwen4exp.context_length",
        "qwen4exp.embedding_length",
        "qwen4exp.block_count",
        "qwen4exp.attention.head_count",
        "qwen4exp.attention.layer_norm_rms_epsilon",
        "qwen4exp.hyper_connection.count",
        "qwen4exp.hyper_connection.low_rank",
        "qwen4exp.expert_count",
        "qwen4exp.expert_used_count",
        "qwen4exp.rope.dimension_sections",
        "qwen4exp.ssm.conv_kernel",
        "qwen4exp.ssm.inner_size",
        "qwen4exp.ssm.state_size",
        "qwen4exp.ssm.time_step_rank",
        "qwen4exp.ssm.group_count",
        "qwen4exp.attention.indexer.head_count",
        "qwen4exp.attention.indexer.key_length",
        "qwen4exp.attention.indexer.top_k",
    ];
    for key in required {
        assert!(g.contains_key(key), "the synthetic file lacks {key}");
        let msg = error(&rewrite(&g, &[(key, None)], None, None));
        println!("{key} missing: {msg}");
        assert!(msg.contains(key), "{key}: {msg}");
    }
}

#[test]
fn each_required_tensor_missing_is_an_error_naming_it() {
    let g = tiny();
    let names: Vec<String> = g.tensors().iter().map(|t| t.name.clone()).collect();
    assert!(names.len() > 30, "{} tensors", names.len());
    for name in &names {
        if name == "output.weight" {
            continue; // optional: the head is then tied to the embedding
        }
        let msg = error(&rewrite(&g, &[], Some(name), None));
        assert!(
            msg.contains(name.as_str()) && msg.contains("missing"),
            "{name}: {msg}"
        );
    }
    println!(
        "{} tensors, each refused by name when missing",
        names.len() - 1
    );
}

#[test]
fn a_wrong_shape_is_an_error_naming_the_tensor_and_both_shapes() {
    let g = tiny();
    for name in [
        "blk.0.hc_attn_down.weight",
        "blk.1.ffn_down_exps.weight",
        "output_hc_up.weight",
    ] {
        let d = g.tensor(name).expect("present").dims.clone();
        // the same elements, the dims swapped
        let mut swapped = d.clone();
        swapped.swap(0, 1);
        let msg = error(&rewrite(&g, &[], None, Some((name, swapped))));
        println!("{name}: {msg}");
        assert!(msg.contains(name) && msg.contains("expected"), "{msg}");
    }
}

#[test]
fn values_the_model_cannot_have_are_errors_naming_the_key() {
    let g = tiny();
    let cases: [(&str, Value, &str); 5] = [
        (
            "qwen4exp.hyper_connection.count",
            Value::U32(1),
            "greater than one",
        ),
        (
            "qwen4exp.hyper_connection.low_rank",
            Value::U32(0),
            "greater than zero",
        ),
        (
            "qwen4exp.expert_used_count",
            Value::U32(99),
            "more than expert_count",
        ),
        (
            "qwen4exp.ssm.state_size",
            Value::U32(0),
            "greater than zero",
        ),
        (
            "qwen4exp.attention.indexer.top_k",
            Value::U32(0),
            "greater than zero",
        ),
    ];
    for (key, v, why) in cases {
        let msg = error(&rewrite(&g, &[(key, Some(v))], None, None));
        println!("{key}: {msg}");
        assert!(msg.contains(key) && msg.contains(why), "{msg}");
    }
}

#[test]
fn layers_the_engine_does_not_run_yet_are_refused_by_name() {
    let g = tiny();
    let n = 2;
    let cases: [(&str, Value, &str); 4] = [
        (
            "qwen4exp.attention.recurrent_layers",
            Value::Array(Array::Bool(vec![false, true])),
            "layer 1 is a Gated DeltaNet",
        ),
        (
            "qwen4exp.attention.compress_ratios",
            Value::Array(Array::U32(vec![4, 0])),
            "layer 0 is a QSA",
        ),
        (
            "qwen4exp.ple.layers",
            Value::Array(Array::U32(vec![1])),
            "PLE",
        ),
        ("qwen4exp.nextn_predict_layers", Value::U32(1), "MTP block"),
    ];
    for (key, v, why) in cases {
        let msg = error(&rewrite(&g, &[(key, Some(v))], None, None));
        println!("{key}: {msg}");
        assert!(msg.contains(why), "{msg}");
    }
    // without the recurrent_layers key llama.cpp's default makes 3 of every 4 layers DeltaNet
    let msg = error(&rewrite(
        &g,
        &[("qwen4exp.attention.recurrent_layers", None)],
        None,
        None,
    ));
    assert!(msg.contains("layer 0 is a Gated DeltaNet"), "{msg}");
    assert_eq!(n, 2);
}
