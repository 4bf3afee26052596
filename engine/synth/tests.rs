//! The synthetic writer read back through the engine's GGUF reader: determinism, the keys
//! llama.cpp's qwen4exp loader reads, every tensor's name, type and ggml dims, the fused layout,
//! and the checks' messages.

use super::*;
use crate::gguf::{GgmlType, Gguf};

fn tiny() -> SynthGeometry {
    SynthGeometry::preset("tiny").expect("tiny is a preset")
}

fn read(g: &SynthGeometry) -> Gguf {
    Gguf::from_bytes(to_bytes(g).expect("valid geometry")).expect("the reader accepts the file")
}

fn values(f: &Gguf, name: &str) -> Vec<f32> {
    let info = f.tensor(name).expect("tensor present");
    let bytes = f.tensor_data(info).expect("tensor data");
    let mut out = vec![0f32; info.n_elements as usize];
    crate::quant::dequantize_by_type(info.ggml_type.id(), bytes, &mut out).expect("known type");
    out
}

#[test]
fn same_geometry_same_bytes_other_seed_other_bytes() {
    let a = to_bytes(&tiny()).expect("valid");
    let b = to_bytes(&tiny()).expect("valid");
    assert!(a == b, "two runs differ");
    let mut g = tiny();
    g.seed = 2;
    let c = to_bytes(&g).expect("valid");
    assert_eq!(a.len(), c.len());
    assert!(a != c, "the seed changes the weights");
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tiny.gguf");
    let w = write_file(&tiny(), &path).expect("written");
    assert_eq!(w.bytes, a.len() as u64);
    assert_eq!(
        w.sha256,
        sha256_hex(&a),
        "the streamed digest is the file's"
    );
    assert_eq!(std::fs::read(&path).expect("file"), a);
    println!(
        "tiny seed 1: {} bytes, {} tensors, sha256 {}",
        w.bytes, w.tensors, w.sha256
    );
}

#[test]
fn keys_llama_cpp_reads() {
    let g = tiny();
    let f = read(&g);
    let k = |s: &str| format!("qwen4exp.{s}");
    assert_eq!(f.get_str("general.architecture").expect("arch"), "qwen4exp");
    assert_eq!(f.get_str("general.name").expect("name"), NAME);
    assert_eq!(
        f.get_u32("general.file_type").expect("file_type"),
        1,
        "mostly F16"
    );
    for (key, want) in [
        ("context_length", g.ctx_train),
        ("embedding_length", 64),
        ("block_count", 2),
        ("attention.head_count", 4),
        ("attention.head_count_kv", 2),
        ("attention.key_length", 32),
        ("attention.value_length", 32),
        ("rope.dimension_count", 8),
        ("expert_count", 8),
        ("expert_used_count", 2),
        ("expert_feed_forward_length", 32),
        ("expert_shared_feed_forward_length", 64),
        ("hyper_connection.count", 4),
        ("hyper_connection.low_rank", 16),
        ("attention.indexer.head_count", 2),
        ("attention.indexer.key_length", 16),
        ("attention.indexer.top_k", 64),
        ("ssm.conv_kernel", 4),
        ("ssm.state_size", 16),
        ("ssm.group_count", 2),
        ("ssm.time_step_rank", 4),
        ("ssm.inner_size", 64),
    ] {
        assert_eq!(f.get_u32(&k(key)).expect(key), want, "{key}");
    }
    assert_eq!(f.get_f32(&k("rope.freq_base")).expect("base"), 10_000.0);
    assert_eq!(
        f.get_f32(&k("attention.layer_norm_rms_epsilon"))
            .expect("eps"),
        1e-6
    );
    assert_eq!(
        f.get_i32_array(&k("rope.dimension_sections"))
            .expect("sections"),
        [2, 1, 1, 0]
    );
    assert_eq!(
        f.get_i32_array(&k("attention.compress_ratios"))
            .expect("ratios"),
        [0, 0]
    );
    match f
        .get_array(&k("attention.recurrent_layers"))
        .expect("recurrent")
    {
        crate::gguf::Array::Bool(v) => assert_eq!(v, &[false, false]),
        a => panic!("recurrent_layers is {a:?}, want a bool array"),
    }
    let mut dn = tiny();
    dn.layers[0] = LayerKind::DeltaNet;
    match read(&dn)
        .get_array(&k("attention.recurrent_layers"))
        .expect("recurrent")
    {
        crate::gguf::Array::Bool(v) => assert_eq!(v, &[true, false]),
        a => panic!("recurrent_layers is {a:?}, want a bool array"),
    }
    for absent in [
        "nextn_predict_layers",
        "ple.layers",
        "full_attention_interval",
    ] {
        assert!(!f.contains_key(&k(absent)), "{absent} must be absent");
    }
    assert_eq!(f.get_str("tokenizer.ggml.model").expect("model"), "llama");
    assert_eq!(
        f.get_str_array("tokenizer.ggml.tokens")
            .expect("tokens")
            .len(),
        320
    );
    assert_eq!(f.get_u32("tokenizer.ggml.bos_token_id").expect("bos"), 1);
    assert!(f.get_bool("tokenizer.ggml.add_bos_token").expect("add_bos"));
}

/// Every tensor of `g`: name, type, ggml dims (llama.cpp's load_arch_tensors, written out).
fn expected(g: &SynthGeometry) -> Vec<(String, GgmlType, Vec<u64>)> {
    let (n, s, r) = (g.n_embd as u64, g.n_hc as u64, g.hc_rank as u64);
    let (hd, q, kv) = (
        g.head_dim as u64,
        (g.n_head * g.head_dim) as u64,
        (g.n_head_kv * g.head_dim) as u64,
    );
    let (e, ff, sff, v) = (
        g.n_expert as u64,
        g.n_ff_exp as u64,
        g.n_ff_shexp as u64,
        g.n_vocab as u64,
    );
    let (ih, id) = (g.indexer_heads as u64, g.indexer_dim as u64);
    let (m, h, f32) = (g.mat_type.ggml(), g.hc_type.ggml(), GgmlType::F32);
    let mut out = vec![("token_embd.weight".to_string(), m, vec![n, v])];
    let hc = |p: &str, inject: bool, out: &mut Vec<_>| {
        out.push((format!("{p}_norm.weight"), f32, vec![n, s]));
        out.push((format!("{p}_down.weight"), h, vec![s * n, r]));
        out.push((format!("{p}_up.weight"), h, vec![r, s * n]));
        if inject {
            out.push((format!("{p}_inject.weight"), f32, vec![s * n, s]));
        }
    };
    for il in 0..g.n_layer {
        let b = |t: &str| format!("blk.{il}.{t}.weight");
        hc(&format!("blk.{il}.hc_attn"), true, &mut out);
        if g.layers[il as usize] == LayerKind::Attention {
            out.push((b("attn_q"), m, vec![n, 2 * q]));
            out.push((b("attn_k"), m, vec![n, kv]));
            out.push((b("attn_v"), m, vec![n, kv]));
            out.push((b("attn_output"), m, vec![q, n]));
            out.push((b("attn_q_norm"), f32, vec![hd]));
            out.push((b("attn_k_norm"), f32, vec![hd]));
            out.push((b("indexer.q_proj"), m, vec![n, ih * id]));
            out.push((b("indexer.k_proj"), m, vec![n, id]));
            out.push((b("indexer.q_norm"), f32, vec![id]));
            out.push((b("indexer.k_norm"), f32, vec![id]));
        } else {
            let (sd, vh) = (g.ssm_state as u64, g.ssm_v_heads as u64);
            let (key, value) = (sd * g.ssm_groups as u64, sd * vh);
            out.push((b("attn_qkv"), m, vec![n, 2 * key + value]));
            out.push((b("attn_gate"), m, vec![n, value]));
            out.push((
                b("ssm_conv1d"),
                f32,
                vec![g.ssm_conv as u64, 2 * key + value],
            ));
            out.push((format!("blk.{il}.ssm_dt.bias"), f32, vec![vh]));
            out.push((format!("blk.{il}.ssm_a"), f32, vec![vh]));
            out.push((b("ssm_beta"), m, vec![n, vh]));
            out.push((b("ssm_alpha"), m, vec![n, vh]));
            out.push((b("ssm_norm"), f32, vec![sd]));
            out.push((b("ssm_out"), m, vec![value, n]));
        }
        hc(&format!("blk.{il}.hc_ffn"), true, &mut out);
        out.push((b("ffn_gate_inp"), f32, vec![n, e]));
        if g.fused_gate_up {
            out.push((b("ffn_gate_up_exps"), m, vec![n, 2 * ff, e]));
        } else {
            out.push((b("ffn_gate_exps"), m, vec![n, ff, e]));
            out.push((b("ffn_up_exps"), m, vec![n, ff, e]));
        }
        out.push((b("ffn_down_exps"), m, vec![ff, n, e]));
        out.push((b("ffn_gate_inp_shexp"), f32, vec![n]));
        out.push((b("ffn_gate_shexp"), m, vec![n, sff]));
        out.push((b("ffn_up_shexp"), m, vec![n, sff]));
        out.push((b("ffn_down_shexp"), m, vec![sff, n]));
    }
    hc("output_hc", false, &mut out);
    if !g.tied_output {
        out.push(("output.weight".to_string(), m, vec![n, v]));
    }
    out
}

#[test]
fn tensors_names_types_dims() {
    let mut variants = vec![tiny(), SynthGeometry::preset("small").expect("small")];
    let mut q8 = tiny();
    (q8.hc_type, q8.mat_type, q8.hc_rank, q8.tied_output) =
        (WeightType::Q8_0, WeightType::Q8_0, 32, true);
    variants.push(q8);
    let mut bf = tiny();
    (bf.hc_type, bf.mat_type) = (WeightType::Bf16, WeightType::F32);
    variants.push(bf);
    let mut dn = tiny();
    dn.set_layers(3);
    dn.layers[0] = LayerKind::DeltaNet;
    dn.layers[2] = LayerKind::DeltaNet;
    variants.push(dn);
    for g in variants {
        let f = read(&g);
        let want = expected(&g);
        let got: Vec<(String, GgmlType, Vec<u64>)> = f
            .tensors()
            .iter()
            .map(|t| (t.name.clone(), t.ggml_type, t.dims.clone()))
            .collect();
        assert_eq!(got, want, "{}", g.summary());
        let (_, count) = writer::build_counted(&g).expect("valid");
        assert_eq!(count, want.len());
    }
}

#[test]
fn scales_and_fused_layout() {
    let f = read(&tiny());
    for name in [
        "blk.0.hc_attn_norm.weight",
        "blk.1.attn_q_norm.weight",
        "output_hc_norm.weight",
    ] {
        let v = values(&f, name);
        assert!(
            v.iter().all(|x| (0.5..1.5).contains(x)),
            "{name}: folded gammas near 1"
        );
    }
    let rms =
        |v: &[f32]| (v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>() / v.len() as f64).sqrt();
    let emb = rms(&values(&f, "token_embd.weight"));
    assert!((emb - 0.3).abs() < 0.02, "embedding rms {emb}");
    // gain 1 over n_in = 64: rms 1/8 (F16 storage)
    let q = rms(&values(&f, "blk.0.attn_q.weight"));
    assert!((q - 0.125).abs() < 0.01, "attn_q rms {q}");

    let mut fused_g = tiny();
    fused_g.fused_gate_up = true;
    let fused = read(&fused_g);
    let (gate, up) = (
        values(&f, "blk.1.ffn_gate_exps.weight"),
        values(&f, "blk.1.ffn_up_exps.weight"),
    );
    let both = values(&fused, "blk.1.ffn_gate_up_exps.weight");
    let per = 64 * 32;
    for e in 0..8 {
        let at = 2 * per * e;
        assert_eq!(
            &both[at..at + per],
            &gate[per * e..per * (e + 1)],
            "expert {e} gate rows"
        );
        assert_eq!(
            &both[at + per..at + 2 * per],
            &up[per * e..per * (e + 1)],
            "expert {e} up rows"
        );
    }
    assert_eq!(
        values(&fused, "blk.1.ffn_down_exps.weight"),
        values(&f, "blk.1.ffn_down_exps.weight")
    );
}

#[test]
fn bad_geometry_names_the_flag() {
    type Change = Box<dyn Fn(&mut SynthGeometry)>;
    let cases: Vec<(&str, Change)> = vec![
        ("--streams", Box::new(|g| g.n_hc = 1)),
        ("--rank", Box::new(|g| g.hc_rank = 0)),
        ("--experts-used", Box::new(|g| g.n_expert_used = 9)),
        ("--head-dim", Box::new(|g| g.head_dim = 24)),
        ("--kv-heads", Box::new(|g| g.n_head_kv = 3)),
        (
            "--rope-sections",
            Box::new(|g| g.rope_sections = [1, 1, 1, 0]),
        ),
        ("--vocab", Box::new(|g| g.n_vocab = 300)),
        ("--shared-ff", Box::new(|g| g.n_ff_shexp = 0)),
        ("--hc-type", Box::new(|g| g.hc_type = WeightType::Q8_0)),
        (
            "--layer-kinds",
            Box::new(|g| g.layers.push(LayerKind::Attention)),
        ),
        ("--std", Box::new(|g| g.embd_std = f32::NAN)),
        ("--ssm-groups", Box::new(|g| g.ssm_groups = 3)),
    ];
    for (flag, change) in cases {
        let mut g = tiny();
        change(&mut g);
        let e = to_bytes(&g).expect_err(flag).to_string();
        println!("{e}");
        assert!(e.starts_with(flag), "{flag}: {e}");
    }
}

#[test]
fn presets_are_valid_and_sections_follow_qwen() {
    for name in PRESETS {
        let g = SynthGeometry::preset(name).expect("preset");
        g.validate().unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    assert_eq!(default_sections(32), [11, 11, 10, 0], "Qwen3.5's default");
    assert_eq!(default_sections(16), [6, 5, 5, 0]);
    assert_eq!(default_sections(2), [1, 1, 0, 0]);
    let seeds = SynthGeometry::preset("seeds").expect("seeds");
    assert_eq!(
        (seeds.n_embd, seeds.n_hc, seeds.hc_rank, seeds.hc_type),
        (2560, 4, 320, WeightType::Bf16)
    );
}
