//! Compute kernel families: Rust launchers and f64 references beside the SYCL sources in
//! `sycl/kernels/` (one file per family). See docs/kernels.md.

pub mod ktiled;
pub mod matmul;
pub mod matmul_tile;
pub mod mmvq;
pub mod mmvq_kreg;
pub mod qmatrix;
pub mod tiled;
pub mod vnni;
pub mod xstage;

pub use matmul_tile::MatmulTile;
pub use mmvq::NormTail;
pub use qmatrix::{
    matrix_ref, repack, repacked_bytes, Family, GgufBytes, MatrixError, MatrixKernels, QuantMatrix,
    WeightView,
};
pub use xstage::XStage;

// Float kernels (embedding, norms, RoPE, KV cache, attention, softmax, element-wise, MoE routing
// and recombination, gated attention), and the
// fused ones around the matrix products (norm_q8, glu_q8: + activation rounding; rope_kv).
pub mod act;
pub mod actq;
pub mod attn;
pub mod attn_prefill;
pub mod embed;
pub mod float_args;
pub mod gated_attn;
pub mod glu_q8;
pub mod hc;
pub mod hc_fast;
pub mod hc_ref;
pub mod kv;
pub mod moe;
pub mod norm;
pub mod norm_q8;
pub mod rope;
pub mod rope_kv;
pub mod softmax;
