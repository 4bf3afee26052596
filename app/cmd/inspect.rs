//! `strata inspect FILE`: what a GGUF file holds: architecture and hyper-parameters, tokenizer,
//! chat template, tensors by type; `--tensors` lists every tensor, `--metadata` every key,
//! `--json` prints the same as one JSON object. Any problem with the file ends in an error naming
//! the field (exit 1), after whatever could be shown. A closed stdout (`| head -1`) ends it
//! with "writing to stdout: Broken pipe" (exit 1).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use serde_json::{json, Value as Json};
use strata::gguf::{ArchParams, GgmlType, Gguf, HParams, Qwen4expParams, MERGES_KEY, TOKENS_KEY};

use super::common;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The GGUF file.
    pub file: PathBuf,
    /// List every tensor (name, type, dims in ggml order, bytes, absolute data offset).
    #[arg(long)]
    pub tensors: bool,
    /// List every metadata key with its type and a short rendering of its value.
    #[arg(long)]
    pub metadata: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let g = common::open_gguf(&args.file)?;
    let hparams = HParams::from_gguf(&g);
    let report = Report::new(&g)?;
    let mut out = common::stdout_buffered();
    if args.json {
        let mut j = report.json(&g, &hparams);
        if args.tensors {
            j["tensors"] = g
                .tensors()
                .iter()
                .map(|t| {
                    json!({"name": t.name, "type": t.ggml_type.name(), "dims": t.dims,
                           "n_bytes": t.n_bytes, "offset": t.file_offset})
                })
                .collect();
        }
        if args.metadata {
            j["metadata"] = g
                .metadata()
                .map(|(k, v)| json!({"key": k, "type": v.type_name(), "value": v.to_string()}))
                .collect();
        }
        writeln!(out, "{}", serde_json::to_string_pretty(&j)?)?;
    } else {
        report.print_text(&g, &hparams, &mut out)?;
        if args.metadata {
            writeln!(out, "\nmetadata ({} keys):", g.n_metadata())?;
            for (k, v) in g.metadata() {
                writeln!(out, "  {k:<48} {:<16} {v}", v.type_name())?;
            }
        }
        if args.tensors {
            writeln!(
                out,
                "\n{:<48} {:<8} {:<28} {:>12} {:>12}",
                "tensor", "type", "dims", "bytes", "offset"
            )?;
            for t in g.tensors() {
                let dims = format!("{:?}", t.dims);
                writeln!(
                    out,
                    "{:<48} {:<8} {:<28} {:>12} {:>12}",
                    t.name,
                    t.ggml_type.name(),
                    dims,
                    t.n_bytes,
                    t.file_offset
                )?;
            }
        }
    }
    out.flush()?;
    // The rest of the report is out; now a bad or unsupported architecture fails the command.
    hparams.with_context(|| "hyper-parameters".to_string())?;
    // ... and so does a shape the model engine would refuse to load (e.g. a block_count past the
    // blocks the file holds). An architecture the engine does not run is not an error here.
    match strata::model::ModelConfig::from_gguf(&g) {
        Ok(_) | Err(strata::model::ConfigError::Unsupported { .. }) => Ok(()),
        Err(e) => Err(e).context("the model engine would not load this file"),
    }
}

struct Tokenizer {
    model: Option<String>,
    pre: Option<String>,
    n_tokens: Option<usize>,
    n_merges: Option<usize>,
    /// (name, id, token text) for each `tokenizer.ggml.*_token_id`.
    special: Vec<(String, u64, Option<String>)>,
    chat_template_len: Option<usize>,
}

struct Report {
    by_type: BTreeMap<GgmlType, (u64, u64)>,
    total_bytes: u64,
    tok: Tokenizer,
}

impl Report {
    fn new(g: &Gguf) -> anyhow::Result<Report> {
        let mut by_type: BTreeMap<GgmlType, (u64, u64)> = BTreeMap::new();
        for t in g.tensors() {
            let e = by_type.entry(t.ggml_type).or_default();
            e.0 += 1;
            e.1 += t.n_bytes;
        }
        let total_bytes = g.tensors().iter().map(|t| t.n_bytes).sum();
        let tokens = match g.get(TOKENS_KEY) {
            Some(_) => Some(g.get_str_array(TOKENS_KEY)?),
            None => None,
        };
        let n_merges = match g.get(MERGES_KEY) {
            Some(_) => Some(g.get_str_array(MERGES_KEY)?.len()),
            None => None,
        };
        let special = g
            .metadata()
            .filter_map(|(k, v)| {
                let name = k
                    .strip_prefix("tokenizer.ggml.")?
                    .strip_suffix("_token_id")?;
                // The reader checked these ids are integers within the vocabulary.
                let id = u64::try_from(v.as_integer()?).ok()?;
                let text = tokens.and_then(|t| t.get(id as usize)).cloned();
                Some((name.to_string(), id, text))
            })
            .collect();
        let tok = Tokenizer {
            model: g.opt_str("tokenizer.ggml.model")?.map(str::to_string),
            pre: g.opt_str("tokenizer.ggml.pre")?.map(str::to_string),
            n_tokens: tokens.map(|t| t.len()),
            n_merges,
            special,
            chat_template_len: g.opt_str("tokenizer.chat_template")?.map(str::len),
        };
        Ok(Report {
            by_type,
            total_bytes,
            tok,
        })
    }

    fn print_text(
        &self,
        g: &Gguf,
        h: &Result<HParams, strata::gguf::GgufError>,
        out: &mut impl Write,
    ) -> std::io::Result<()> {
        let path = g
            .path()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        writeln!(out, "file:          {path}")?;
        writeln!(
            out,
            "format:        GGUF v{}, {} bytes, alignment {}, data at {}",
            g.version(),
            g.file_len(),
            g.alignment(),
            g.data_offset()
        )?;
        let name = g.opt_str("general.name").ok().flatten().unwrap_or("-");
        let arch = g
            .opt_str("general.architecture")
            .ok()
            .flatten()
            .unwrap_or("(none)");
        writeln!(out, "architecture:  {arch} ({name})")?;
        match h {
            Ok(h) => {
                writeln!(out, "hyper-parameters:")?;
                let rows = hparam_rows(h);
                // the names' column as wide as the longest (qwen4exp's run to 40 characters)
                let w = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0).max(24);
                for (k, v) in rows {
                    writeln!(out, "  {k:<w$} {v}")?;
                }
            }
            Err(e) => writeln!(out, "hyper-parameters: error: {e}")?,
        }
        let t = &self.tok;
        let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
        let count = |v: Option<usize>| v.map_or("-".to_string(), |n| n.to_string());
        writeln!(
            out,
            "tokenizer:     model {}, pre-tokenizer {}, {} tokens, {} merges",
            opt(&t.model),
            opt(&t.pre),
            count(t.n_tokens),
            count(t.n_merges)
        )?;
        for (name, id, text) in &t.special {
            writeln!(
                out,
                "  {name:<10} {id:>7} {}",
                text.as_deref()
                    .map(|s| format!("{s:?}"))
                    .unwrap_or_default()
            )?;
        }
        match t.chat_template_len {
            Some(n) => writeln!(out, "chat template: present ({n} bytes)")?,
            None => writeln!(out, "chat template: none")?,
        }
        writeln!(
            out,
            "tensors:       {} tensors, {} bytes ({:.1} MiB)",
            g.tensors().len(),
            self.total_bytes,
            self.total_bytes as f64 / 1048576.0
        )?;
        for (ty, (n, bytes)) in &self.by_type {
            writeln!(out, "  {:<8} {n:>5} tensors {bytes:>12} bytes", ty.name())?;
        }
        writeln!(out, "metadata:      {} keys", g.n_metadata())
    }

    fn json(&self, g: &Gguf, h: &Result<HParams, strata::gguf::GgufError>) -> Json {
        let t = &self.tok;
        let by_type: serde_json::Map<String, Json> = self
            .by_type
            .iter()
            .map(|(ty, (n, b))| (ty.name().to_string(), json!({"count": n, "bytes": b})))
            .collect();
        let special: serde_json::Map<String, Json> = t
            .special
            .iter()
            .map(|(n, id, text)| (n.clone(), json!({"id": id, "text": text})))
            .collect();
        let (hp, hp_err) = match h {
            Ok(h) => (
                Json::Object(
                    hparam_rows(h)
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), json_number(&v)))
                        .collect(),
                ),
                Json::Null,
            ),
            Err(e) => (Json::Null, Json::String(e.to_string())),
        };
        json!({
            "file": g.path().map(|p| p.display().to_string()),
            "file_size": g.file_len(),
            "version": g.version(),
            "alignment": g.alignment(),
            "data_offset": g.data_offset(),
            "architecture": g.opt_str("general.architecture").ok().flatten(),
            "name": g.opt_str("general.name").ok().flatten(),
            "hparams": hp,
            "hparams_error": hp_err,
            "tokenizer": {
                "model": t.model, "pre": t.pre, "vocab_size": t.n_tokens, "merges": t.n_merges,
                "special": special,
            },
            "chat_template": {"present": t.chat_template_len.is_some(), "length": t.chat_template_len},
            "tensor_count": g.tensors().len(),
            "tensor_bytes": self.total_bytes,
            "by_type": by_type,
            "metadata_count": g.n_metadata(),
        })
    }
}

fn json_number(s: &str) -> Json {
    s.parse::<u64>()
        .map(Json::from)
        .or_else(|_| s.parse::<f64>().map(Json::from))
        .unwrap_or_else(|_| Json::String(s.to_string()))
}

/// (name, value) rows; names are the metadata key suffixes so users can find them in the file.
fn hparam_rows(h: &HParams) -> Vec<(&'static str, String)> {
    let mut rows = vec![
        ("context_length", h.context_length.to_string()),
        ("embedding_length", h.embedding_length.to_string()),
        ("block_count", h.block_count.to_string()),
        ("feed_forward_length", h.feed_forward_length.to_string()),
        ("head_count", h.head_count.to_string()),
        ("head_count_kv", h.head_count_kv.to_string()),
        ("key_length", h.key_length.to_string()),
        ("value_length", h.value_length.to_string()),
        ("rope_dimension_count", h.rope_dimension_count.to_string()),
        ("rope_freq_base", h.rope_freq_base.to_string()),
        ("rms_eps", format!("{:e}", h.rms_eps)),
        ("vocab_size", h.vocab_size.to_string()),
    ];
    if let Some(f) = h.rope_scaling_factor {
        rows.push(("rope_scaling_factor", f.to_string()));
    }
    if let ArchParams::Gemma3(p) = &h.extra {
        rows.push(("sliding_window", p.sliding_window.to_string()));
        rows.push((
            "sliding_window_pattern",
            p.sliding_window_pattern.to_string(),
        ));
        rows.push(("rope_freq_base_local", p.rope_freq_base_local.to_string()));
    }
    if let ArchParams::Qwen4exp(p) = &h.extra {
        rows.extend(qwen4exp_rows(p));
    }
    rows
}

/// The hyper-connection, MoE and layer-kind rows of a qwen4exp file.
fn qwen4exp_rows(p: &Qwen4expParams) -> Vec<(&'static str, String)> {
    let kinds: String = p
        .recurrent
        .iter()
        .zip(&p.compress_ratios)
        .map(|(&r, &c)| match (r, c) {
            (true, _) => 'D',
            (false, 0) => 'A',
            (false, _) => 'Q',
        })
        .collect();
    let ssm = p.ssm.map(|x| x.to_string()).join("/");
    let idx = p.indexer.map(|x| x.to_string()).join("/");
    vec![
        ("hyper_connection.count", p.hc_count.to_string()),
        ("hyper_connection.low_rank", p.hc_rank.to_string()),
        ("expert_count", p.n_expert.to_string()),
        ("expert_used_count", p.n_expert_used.to_string()),
        ("expert_feed_forward_length", p.n_ff_exp.to_string()),
        (
            "expert_shared_feed_forward_length",
            p.n_ff_shexp.to_string(),
        ),
        (
            "expert_gating",
            "softmax, top-k, renormalised (fixed)".into(),
        ),
        ("rope.dimension_sections", format!("{:?}", p.rope_sections)),
        // A = full attention, D = Gated DeltaNet, Q = QSA (compressed) attention
        ("layer_kinds", kinds),
        ("ple.layers", format!("{:?}", p.ple_layers)),
        ("nextn_predict_layers", p.nextn_layers.to_string()),
        ("ssm (conv/inner/state/dt_rank/groups)", ssm),
        ("attention.indexer (heads/key_length/top_k)", idx),
    ]
}
