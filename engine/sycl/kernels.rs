//! The table of every SYCL kernel source in `sycl/kernels/`, embedded in the binary and compiled
//! at run time (see `Context::module`). One file per kernel family; add a line per new file.

/// One kernel source file.
#[derive(Debug)]
pub struct KernelSource {
    /// Short name, used as the module-cache key and in error messages.
    pub name: &'static str,
    /// Path in the repository, for messages.
    pub file: &'static str,
    pub text: &'static str,
}

macro_rules! source {
    ($name:literal) => {
        KernelSource {
            name: $name,
            file: concat!("sycl/kernels/", $name, ".cpp"),
            text: include_str!(concat!("../../sycl/kernels/", $name, ".cpp")),
        }
    };
}

/// A kernel file with shared inline pieces prepended (`sycl/kernels/<hdr>.hpp`, in order): the
/// fused kernels and the unfused ones they replace compute with the very same code; `addr.hpp`
/// is the cast of the decode kernels' buffer addresses.
macro_rules! source_with {
    ($name:literal, [$($hdr:literal),+]) => {
        KernelSource {
            name: $name,
            file: concat!("sycl/kernels/", $name, ".cpp (+", $(" ", $hdr, ".hpp",)+ ")"),
            text: concat!(
                $(include_str!(concat!("../../sycl/kernels/", $hdr, ".hpp")), "\n",)+
                include_str!(concat!("../../sycl/kernels/", $name, ".cpp"))
            ),
        }
    };
}

/// Sub-group and arrival-counter reductions (the foundation tests).
pub const REDUCE: KernelSource = source!("reduce");

/// Embedding row fetch (Q8_0 / F16 / F32 token_embd).
pub const EMBED: KernelSource = source_with!("embed", ["addr"]);
/// RMSNorm, plain and fused with the residual add.
pub const NORM: KernelSource = source_with!("norm", ["addr", "norm"]);
/// Rotary position embedding, llama and neox.
pub const ROPE: KernelSource = source_with!("rope", ["rope"]);
/// KV cache write (f32 rows -> f16 cache).
pub const KV: KernelSource = source!("kv");
/// Causal GQA attention over the f16 KV cache (-DCFG_HD=<head_dim>).
pub const ATTN: KernelSource = source_with!("attn", ["addr", "actq", "xstage"]);
/// Attention for many query rows (the prompt path, T > 8; -DCFG_HD=<head_dim>).
pub const ATTN_PREFILL: KernelSource = source!("attn_prefill");
/// Row softmax.
pub const SOFTMAX: KernelSource = source!("softmax");
/// Element-wise: gated activations, add, scale.
pub const ACT: KernelSource = source_with!("act", ["addr", "act"]);
/// Activation rounding through 8-bit blocks (llama.cpp-compatible matmul inputs; model helper).
pub const ACTQ: KernelSource = source_with!("actq", ["addr", "actq", "xstage"]);
/// RMSNorm (plain, residual-add variants) fused with the 8-bit rounding of its output.
pub const NORM_Q8: KernelSource =
    source_with!("norm_q8", ["addr", "norm", "actq", "xstage", "norm_q8"]);
/// Gated activation (SiLU / GELU-tanh times up) fused with the 8-bit rounding of its output.
pub const GLU_Q8: KernelSource = source_with!("glu_q8", ["addr", "act", "actq", "xstage"]);
/// RoPE on q and k + the f16 KV-cache store (+ Gemma's per-head q/k norms) in one launch.
pub const ROPE_KV: KernelSource = source_with!("rope_kv", ["addr", "norm", "rope"]);
/// The default hyper-connection read, four launches (engine/kernels/hc.rs; -DHC_DOWN / -DHC_INJ /
/// -DHC_UP = the weights' ggml types).
pub const HC: KernelSource = source_with!("hc", ["addr", "norm"]);
/// The fast hyper-connection reads, two launches (engine/kernels/hc_fast.rs; STRATA_HC_Q8 /
/// STRATA_GR_FUSED: -DHCF_W = the Q8_0 copy or the stored type of W_down / W_up, -DHCF_INJ).
pub const HC_FAST: KernelSource = source_with!("hc_fast", ["addr"]);
/// Mixture-of-experts routing (softmax, top-k, renormalised weights), row gather, recombination.
pub const MOE: KernelSource = source_with!("moe", ["addr"]);
/// Gated attention: the q projection split into q and gate, att * sigmoid(gate).
pub const GATED_ATTN: KernelSource = source_with!("gated_attn", ["addr"]);

/// Matrix products (engine/kernels/{mmvq,matmul}.rs): the per-format decode traits of
/// `qformats.hpp` prepended to each family's kernel.
macro_rules! source_qformats {
    ($name:literal) => {
        KernelSource {
            name: $name,
            file: concat!("sycl/kernels/", $name, ".cpp (+ qformats.hpp)"),
            text: concat!(
                include_str!("../../sycl/kernels/qformats.hpp"),
                "\n",
                include_str!(concat!("../../sycl/kernels/", $name, ".cpp"))
            ),
        }
    };
}
pub const MMVQ: KernelSource = source_qformats!("mmvq");
/// The prompt's matrix product; `untile.hpp` too, for its tiled-copy reader (-DCFG_TILED).
pub const MATMUL: KernelSource = KernelSource {
    name: "matmul",
    file: "sycl/kernels/matmul.cpp (+ qformats.hpp untile.hpp)",
    text: concat!(
        include_str!("../../sycl/kernels/qformats.hpp"),
        "\n",
        include_str!("../../sycl/kernels/untile.hpp"),
        "\n",
        include_str!("../../sycl/kernels/matmul.cpp")
    ),
};
/// `mmvq` and `matmul` for the formats that decode through ggml's lookup tables (the i-quants
/// IQ2_XXS ... IQ1_M: `qmatrix::uses_grids`): the tables of engine/quant/grids.rs (the single
/// copy, from engine/quant/grids/*.bin) as `static const` C arrays, then `qformats_iq.hpp` in
/// place of `qformats.hpp`, then the kernel file. Built once per process (the text is leaked
/// into a `&'static str`); `MMVQ` and `MATMUL` stay byte-identical, so the default formats'
/// module keys and cached binaries do not move. See docs/quant.md, "i-quant grid tables".
pub fn mmvq_grids() -> &'static KernelSource {
    static S: std::sync::OnceLock<KernelSource> = std::sync::OnceLock::new();
    S.get_or_init(|| KernelSource {
        name: "mmvq_grids",
        file: "sycl/kernels/mmvq.cpp (+ grids.rs tables, qformats_iq.hpp)",
        text: with_grids(&[include_str!("../../sycl/kernels/mmvq.cpp")]),
    })
}

/// `matmul` for the grid formats (see `mmvq_grids`); `untile.hpp` as in `MATMUL` (it is only
/// active under -DCFG_TILED, which these formats never get: they have no tiled copy).
pub fn matmul_grids() -> &'static KernelSource {
    static S: std::sync::OnceLock<KernelSource> = std::sync::OnceLock::new();
    S.get_or_init(|| KernelSource {
        name: "matmul_grids",
        file: "sycl/kernels/matmul.cpp (+ grids.rs tables, qformats_iq.hpp untile.hpp)",
        text: with_grids(&[
            include_str!("../../sycl/kernels/untile.hpp"),
            include_str!("../../sycl/kernels/matmul.cpp"),
        ]),
    })
}

/// The grid tables, `qformats_iq.hpp`, then `parts`, as one leaked string (built once per
/// source by the OnceLocks above, so the leak is bounded: two strings per process).
fn with_grids(parts: &[&str]) -> &'static str {
    let mut text = crate::quant::grids::c_tables();
    text.push('\n');
    text.push_str(include_str!("../../sycl/kernels/qformats_iq.hpp"));
    for p in parts {
        text.push('\n');
        text.push_str(p);
    }
    Box::leak(text.into_boxed_str())
}

/// The opt-in KREG mmvq family (STRATA_MMVQ_KREG=1), self-contained: engine/kernels/mmvq_kreg.rs.
pub const MMVQ_KREG: KernelSource = source!("mmvq_kreg");
/// mmvq on weights repacked one lane per row (engine/kernels/tiled.rs); with -DCFG_NORM_TAIL
/// the projections with the norm after them folded in (norm.hpp, actq.hpp, norm_q8.hpp).
pub const MMVQ_TILED: KernelSource =
    source_with!("mmvq_tiled", ["addr", "norm", "actq", "xstage", "norm_q8"]);
/// mmvq on K-quant weights repacked one lane per row (engine/kernels/ktiled.rs); with
/// -DCFG_NORM_TAIL Gemma's post-norm and the norm after it folded in.
pub const MMVQ_KTILED: KernelSource =
    source_with!("mmvq_ktiled", ["addr", "norm", "actq", "xstage", "norm_q8"]);
/// The opt-in integer-dot mmvq on the tiled weights (engine/kernels/vnni.rs): x86 inline
/// assembly, built for the CPU device only.
pub const MMVQ_VNNI: KernelSource = source_with!("mmvq_vnni", ["addr"]);

/// Device read-bandwidth probe (benches/bandwidth.rs).
pub const BANDWIDTH: KernelSource = source!("bandwidth");

/// Every kernel source, for tools that build them all (`strata devices --build-kernels`).
pub const ALL: &[&KernelSource] = &[
    &REDUCE,
    &EMBED,
    &NORM,
    &ROPE,
    &KV,
    &ATTN,
    &SOFTMAX,
    &ACT,
    &ACTQ,
    &MMVQ,
    &MATMUL,
    &BANDWIDTH,
    &MMVQ_KREG,
    &MMVQ_TILED,
    &MMVQ_KTILED,
    &MMVQ_VNNI,
    &ATTN_PREFILL,
    &NORM_Q8,
    &GLU_Q8,
    &ROPE_KV,
    &HC,
    &HC_FAST,
    &MOE,
    &GATED_ATTN,
];

/// Looks a source up by name.
pub fn by_name(name: &str) -> Option<&'static KernelSource> {
    ALL.iter().copied().find(|s| s.name == name)
}
