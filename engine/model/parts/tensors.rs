//! The tensors a model's parts read, with their shapes: the table an architecture's
//! declaration implies, checked against the file before anything is loaded (one error naming
//! the tensor, its dims and what they should be). The device loader and the reference read the
//! same names.

use super::{Ffn, Hyper, Layer, Mixer, Residual};
use crate::gguf::Gguf;
use crate::model::config::{names, ConfigError, ModelConfig};

/// One tensor: its name, its GGUF dims (ne0 first: a matrix (n_out, n_in) is [n_in, n_out]), and
/// those dims in words for errors.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorDecl {
    pub name: String,
    pub dims: Vec<usize>,
    pub words: &'static str,
    /// A file may leave it out (an untied head: `output.weight`).
    pub optional: bool,
}

fn decl(name: String, dims: &[usize], words: &'static str) -> TensorDecl {
    TensorDecl {
        name,
        dims: dims.to_vec(),
        words,
        optional: false,
    }
}

/// The tensors outside the layers: the embedding, the residual's output read, the head.
pub fn model(c: &ModelConfig) -> Vec<TensorDecl> {
    let (e, v) = (c.n_embd, c.n_vocab);
    let mut out = vec![decl(names::TOKEN_EMBD.into(), &[e, v], "[n_embd, n_vocab]")];
    match c.residual {
        Residual::Single => out.push(decl(names::OUTPUT_NORM.into(), &[e], "[n_embd]")),
        Residual::Hyper(h) => out.extend(hc_read(
            c,
            h,
            [
                names::OUTPUT_HC_NORM.into(),
                names::OUTPUT_HC_DOWN.into(),
                names::OUTPUT_HC_UP.into(),
            ],
            None,
        )),
    }
    out.push(TensorDecl {
        optional: true,
        ..decl(names::OUTPUT.into(), &[e, v], "[n_embd, n_vocab]")
    });
    out
}

/// A hyper-connection mixer's tensors: gamma [n_embd, S] (stored folded, 1 + w), the down
/// projection (S n -> r), the up projection (r -> S n) and, except at the head, the injection
/// rows (S n -> S). `names`: norm, down, up; `inject`: the injection's name.
fn hc_read(
    c: &ModelConfig,
    h: Hyper,
    names: [String; 3],
    inject: Option<String>,
) -> Vec<TensorDecl> {
    let (e, s, r) = (c.n_embd, h.streams, h.rank);
    let [norm, down, up] = names;
    let mut out = vec![
        decl(norm, &[e, s], "[n_embd, hc_count]"),
        decl(down, &[s * e, r], "[hc_count * n_embd, hc_low_rank]"),
        decl(up, &[r, s * e], "[hc_low_rank, hc_count * n_embd]"),
    ];
    if let Some(inject) = inject {
        out.push(decl(inject, &[s * e, s], "[hc_count * n_embd, hc_count]"));
    }
    out
}

/// A sublayer's read: its RMS norm (`norm`), or its hyper-connection mixer (`hc_{site}_*`).
fn read(c: &ModelConfig, il: usize, norm: &str, site: &str) -> Vec<TensorDecl> {
    let n = |w: &str| names::blk(il, w);
    match c.residual {
        Residual::Single => vec![decl(n(norm), &[c.n_embd], "[n_embd]")],
        Residual::Hyper(h) => hc_read(
            c,
            h,
            [
                n(&format!("hc_{site}_norm")),
                n(&format!("hc_{site}_down")),
                n(&format!("hc_{site}_up")),
            ],
            Some(n(&format!("hc_{site}_inject"))),
        ),
    }
}

/// Layer `il`'s tensors: each sublayer's read (norm or mixer), its part's tensors and its post
/// norm.
pub fn layer(c: &ModelConfig, il: usize, l: &Layer) -> Vec<TensorDecl> {
    let n = |w: &str| names::blk(il, w);
    let (e, hd, qd, kv) = (c.n_embd, c.head_dim, c.q_dim(), c.kv_dim());
    let mut out = read(c, il, "attn_norm", "attn");
    match &l.mixer.part {
        Mixer::Attention(a) => {
            out.push(match a.gated {
                false => decl(n("attn_q"), &[e, qd], "[n_embd, n_head * head_dim]"),
                true => decl(
                    n("attn_q"),
                    &[e, 2 * qd],
                    "[n_embd, 2 * n_head * head_dim] (q and gate per head)",
                ),
            });
            out.extend([
                decl(n("attn_k"), &[e, kv], "[n_embd, n_kv_head * head_dim]"),
                decl(n("attn_v"), &[e, kv], "[n_embd, n_kv_head * head_dim]"),
                decl(n("attn_output"), &[qd, e], "[n_head * head_dim, n_embd]"),
            ]);
            if a.qk_norm {
                out.push(decl(n("attn_q_norm"), &[hd], "[head_dim]"));
                out.push(decl(n("attn_k_norm"), &[hd], "[head_dim]"));
            }
            if let Some(x) = a.indexer {
                let (ih, id) = (x.n_head, x.head_dim);
                out.extend([
                    decl(
                        n("indexer.q_proj"),
                        &[e, ih * id],
                        "[n_embd, indexer.head_count * indexer.key_length]",
                    ),
                    decl(
                        n("indexer.k_proj"),
                        &[e, id],
                        "[n_embd, indexer.key_length]",
                    ),
                    decl(n("indexer.q_norm"), &[id], "[indexer.key_length]"),
                    decl(n("indexer.k_norm"), &[id], "[indexer.key_length]"),
                ]);
            }
        }
    }
    if l.mixer.post_norm {
        out.push(decl(n("post_attention_norm"), &[e], "[n_embd]"));
    }
    out.extend(read(c, il, "ffn_norm", "ffn"));
    match &l.ffn.part {
        Ffn::Dense(d) => out.extend([
            decl(n("ffn_gate"), &[e, d.n_ff], "[n_embd, n_ff]"),
            decl(n("ffn_up"), &[e, d.n_ff], "[n_embd, n_ff]"),
            decl(n("ffn_down"), &[d.n_ff, e], "[n_ff, n_embd]"),
        ]),
        Ffn::Moe(m) => {
            let (x, f) = (m.n_expert, m.n_ff);
            out.push(decl(n("ffn_gate_inp"), &[e, x], "[n_embd, n_expert]"));
            match m.fused_gate_up {
                true => out.push(decl(
                    n("ffn_gate_up_exps"),
                    &[e, 2 * f, x],
                    "[n_embd, 2 * n_ff_exp, n_expert]",
                )),
                false => out.extend([
                    decl(
                        n("ffn_gate_exps"),
                        &[e, f, x],
                        "[n_embd, n_ff_exp, n_expert]",
                    ),
                    decl(n("ffn_up_exps"), &[e, f, x], "[n_embd, n_ff_exp, n_expert]"),
                ]),
            }
            out.push(decl(
                n("ffn_down_exps"),
                &[f, e, x],
                "[n_ff_exp, n_embd, n_expert]",
            ));
            if let Some(s) = m.shared_ff {
                out.extend([
                    decl(n("ffn_gate_shexp"), &[e, s], "[n_embd, n_ff_shexp]"),
                    decl(n("ffn_up_shexp"), &[e, s], "[n_embd, n_ff_shexp]"),
                    decl(n("ffn_down_shexp"), &[s, e], "[n_ff_shexp, n_embd]"),
                ]);
            }
            if m.shared_gate {
                out.push(decl(n("ffn_gate_inp_shexp"), &[e], "[n_embd]"));
            }
        }
    }
    if l.ffn.post_norm {
        out.push(decl(n("post_ffw_norm"), &[e], "[n_embd]"));
    }
    out
}

/// Every tensor the model's declaration reads, in load order.
pub fn all(c: &ModelConfig) -> Vec<TensorDecl> {
    let mut out = model(c);
    for (il, l) in c.layers.iter().enumerate() {
        out.extend(layer(c, il, l));
    }
    out
}

/// Checks each declared tensor against `g`: present (unless optional) with exactly those dims.
pub fn check(g: &Gguf, c: &ModelConfig, file: &str) -> Result<(), ConfigError> {
    for d in all(c) {
        let err = |why: String| ConfigError::Tensor {
            file: file.to_string(),
            name: d.name.clone(),
            why,
        };
        let Some(info) = g.tensor_info(&d.name) else {
            if d.optional {
                continue;
            }
            return Err(err(format!(
                "missing; {} declares it {:?} = {}",
                c.arch.name(),
                d.dims,
                d.words
            )));
        };
        let dims: Vec<usize> = info.dims.iter().map(|&x| x as usize).collect();
        if dims != d.dims {
            return Err(err(format!(
                "dims {dims:?}, expected {:?} = {} ({})",
                d.dims,
                d.words,
                c.arch.name()
            )));
        }
    }
    Ok(())
}
