//! `qwen4exp`'s own hyper-parameters (Qwen3.8-Flash-Next): hyper-connection streams, MoE with a
//! shared expert, the IMRoPE sections, which layers are Gated DeltaNet (recurrent) or QSA
//! (compressed) attention, PLE and the MTP block. Read as llama.cpp 11434's `qwen4exp` loader
//! reads them (src/models/qwen4exp.cpp, `load_arch_hparams`): what it requires is required here,
//! including the `ssm.*` and `attention.indexer.*` keys that a file with no such layer still
//! has to carry; what it defaults is defaulted the same way. Whether the engine *runs* what the
//! file declares (DeltaNet, QSA, PLE, MTP) is the architecture module's decision
//! (engine/model/arch/qwen4exp.rs), not this reader's.

use super::error::{GgufError, Result};
use super::reader::Gguf;
use super::value::{Array, Value};

#[derive(Clone, Debug, PartialEq)]
pub struct Qwen4expParams {
    /// `hyper_connection.count`: S residual streams (> 1: one stream has nothing to mix).
    pub hc_count: u32,
    /// `hyper_connection.low_rank`: r, the read gate's rank (> 0).
    pub hc_rank: u32,
    /// `expert_count` (> 0).
    pub n_expert: u32,
    /// `expert_used_count` (1..=n_expert).
    pub n_expert_used: u32,
    /// `expert_feed_forward_length`, else feed_forward_length / expert_used_count (llama.cpp's
    /// fallback).
    pub n_ff_exp: u32,
    /// `expert_shared_feed_forward_length`, else feed_forward_length.
    pub n_ff_shexp: u32,
    /// `rope.dimension_sections`: the IMRoPE sections (t, h, w, e) in rotated pairs.
    pub rope_sections: [u32; 4],
    /// Per layer: a Gated DeltaNet (linear attention) layer. `attention.recurrent_layers`, else
    /// every layer but each `full_attention_interval`-th (default 4) is recurrent.
    pub recurrent: Vec<bool>,
    /// Per layer: the QSA compress ratio (`attention.compress_ratios`; 0 = dense attention).
    pub compress_ratios: Vec<u32>,
    /// Layers with a PLE n-gram embedding (`ple.layers`).
    pub ple_layers: Vec<u32>,
    /// `nextn_predict_layers`: MTP blocks after the trunk (counted in block_count).
    pub nextn_layers: u32,
    /// `ssm.{conv_kernel, inner_size, state_size, time_step_rank, group_count}`.
    pub ssm: [u32; 5],
    /// `attention.indexer.{head_count, key_length, top_k}`.
    pub indexer: [u32; 3],
}

/// Reads the `qwen4exp.*` keys; `n_layer` is block_count, `n_ff` feed_forward_length (0 when
/// absent, which llama.cpp allows for this architecture).
pub fn read(g: &Gguf, n_layer: u32, n_ff: u32) -> Result<Qwen4expParams> {
    let k = |s: &str| format!("qwen4exp.{s}");
    let nonzero = |s: &str| -> Result<u32> {
        let key = k(s);
        let v = g.get_u32(&key)?;
        if v == 0 {
            return Err(bad(&key, v, "must be greater than zero".into()));
        }
        Ok(v)
    };
    let hc_count = g.get_u32(&k("hyper_connection.count"))?;
    if hc_count <= 1 {
        return Err(bad(
            &k("hyper_connection.count"),
            hc_count,
            "must be greater than one (one stream has nothing to mix)".into(),
        ));
    }
    let hc_rank = nonzero("hyper_connection.low_rank")?;
    let n_expert = nonzero("expert_count")?;
    let n_expert_used = nonzero("expert_used_count")?;
    if n_expert_used > n_expert {
        return Err(bad(
            &k("expert_used_count"),
            n_expert_used,
            format!("is more than expert_count {n_expert}"),
        ));
    }
    let n_ff_exp = match g.opt_u32(&k("expert_feed_forward_length"))? {
        Some(v) => v,
        None => n_ff / n_expert_used,
    };
    if n_ff_exp == 0 {
        return Err(bad(
            &k("expert_feed_forward_length"),
            n_ff_exp,
            "must be greater than zero (absent: feed_forward_length / expert_used_count)".into(),
        ));
    }
    let n_ff_shexp = match g.opt_u32(&k("expert_shared_feed_forward_length"))? {
        Some(v) if v > 0 => v,
        _ => n_ff,
    };
    let sections_key = k("rope.dimension_sections");
    let s = ints(g, &sections_key)?.ok_or(GgufError::MissingKey {
        key: sections_key.clone(),
    })?;
    if s.len() < 4 {
        return Err(bad(
            &sections_key,
            format!("{s:?}"),
            "needs 4 entries (t, h, w, e)".into(),
        ));
    }
    let rope_sections = [s[0] as u32, s[1] as u32, s[2] as u32, s[3] as u32];

    let ssm = [
        nonzero("ssm.conv_kernel")?,
        nonzero("ssm.inner_size")?,
        nonzero("ssm.state_size")?,
        nonzero("ssm.time_step_rank")?,
        nonzero("ssm.group_count")?,
    ];
    let indexer = [
        nonzero("attention.indexer.head_count")?,
        nonzero("attention.indexer.key_length")?,
        nonzero("attention.indexer.top_k")?,
    ];

    let nextn_layers = g.opt_u32(&k("nextn_predict_layers"))?.unwrap_or(0);
    if nextn_layers > n_layer {
        return Err(bad(
            &k("nextn_predict_layers"),
            nextn_layers,
            format!("is more than block_count {n_layer}"),
        ));
    }
    let per_layer = |key: &str, v: Vec<i64>| -> Result<Vec<i64>> {
        match v.len() {
            1 => Ok(vec![v[0]; n_layer as usize]),
            n if n == n_layer as usize => Ok(v),
            n => Err(bad(
                key,
                format!("{n} entries"),
                format!("needs one entry or block_count = {n_layer}"),
            )),
        }
    };
    let rl_key = k("attention.recurrent_layers");
    let recurrent = match ints(g, &rl_key)? {
        Some(v) => per_layer(&rl_key, v)?.into_iter().map(|x| x != 0).collect(),
        None => {
            let interval = g.opt_u32(&k("full_attention_interval"))?.unwrap_or(4);
            if interval == 0 {
                return Err(bad(
                    &k("full_attention_interval"),
                    0,
                    "must be greater than zero".into(),
                ));
            }
            let trunk = n_layer - nextn_layers;
            (0..n_layer)
                .map(|i| i < trunk && (i + 1) % interval != 0)
                .collect()
        }
    };
    let cr_key = k("attention.compress_ratios");
    let compress_ratios = match ints(g, &cr_key)? {
        Some(v) => per_layer(&cr_key, v)?
            .into_iter()
            .map(|x| u32::try_from(x).map_err(|_| bad(&cr_key, x, "must be >= 0".into())))
            .collect::<Result<Vec<u32>>>()?,
        None => vec![0; n_layer as usize],
    };
    let ple_layers = ints(g, &k("ple.layers"))?
        .unwrap_or_default()
        .into_iter()
        .map(|x| x as u32)
        .collect();

    Ok(Qwen4expParams {
        hc_count,
        hc_rank,
        n_expert,
        n_expert_used,
        n_ff_exp,
        n_ff_shexp,
        rope_sections,
        recurrent,
        compress_ratios,
        ple_layers,
        nextn_layers,
        ssm,
        indexer,
    })
}

/// A key that may be one integer (or bool) or an array of them, as llama.cpp's
/// `get_key_or_arr` accepts; None when absent.
fn ints(g: &Gguf, key: &str) -> Result<Option<Vec<i64>>> {
    let Some(v) = g.get(key) else {
        return Ok(None);
    };
    let wrong = || GgufError::WrongType {
        key: key.to_string(),
        expected: "integer, bool or an array of them".into(),
        actual: v.type_name(),
    };
    let out: Vec<i64> = match v {
        Value::Bool(b) => vec![*b as i64],
        Value::Array(a) => match a {
            Array::Bool(x) => x.iter().map(|&b| b as i64).collect(),
            Array::U8(x) => x.iter().map(|&i| i as i64).collect(),
            Array::I8(x) => x.iter().map(|&i| i as i64).collect(),
            Array::U16(x) => x.iter().map(|&i| i as i64).collect(),
            Array::I16(x) => x.iter().map(|&i| i as i64).collect(),
            Array::U32(x) => x.iter().map(|&i| i as i64).collect(),
            Array::I32(x) => x.iter().map(|&i| i as i64).collect(),
            Array::I64(x) => x.clone(),
            Array::U64(x) => x
                .iter()
                .map(|&i| i64::try_from(i).map_err(|_| bad(key, i, "too large".into())))
                .collect::<Result<Vec<i64>>>()?,
            _ => return Err(wrong()),
        },
        v => {
            let i = v.as_integer().ok_or_else(wrong)?;
            vec![i64::try_from(i).map_err(|_| bad(key, i, "too large".into()))?]
        }
    };
    Ok(Some(out))
}

fn bad(key: &str, value: impl ToString, reason: String) -> GgufError {
    GgufError::BadValue {
        key: key.to_string(),
        value: value.to_string(),
        reason,
    }
}
