//! Compute kernels: a SYCL source per family in `sycl/kernels/`, and here per family a Rust
//! launcher plus a plain Rust reference (f64 accumulation). See docs/kernels.md.

// Float kernels (embedding, norms, RoPE, KV cache, attention, softmax, element-wise).
pub mod act;
pub mod attn;
pub mod embed;
pub mod float_args;
pub mod kv;
pub mod norm;
pub mod rope;
pub mod softmax;
