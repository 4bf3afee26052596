//! The table: one entry per environment variable the engine reads. Adding a variable = a name
//! constant and an entry here, read through `flags::on` / `Flag::value` where it acts, and
//! `strata flags --markdown` pasted into docs/flags.md (a test compares them).

use super::{Bitwise, Flag, Hardware, Kind, Needs, Scope};

pub const VNNI: &str = "STRATA_VNNI";
pub const MMVQ_KREG: &str = "STRATA_MMVQ_KREG";
pub const HC_Q8: &str = "STRATA_HC_Q8";
pub const GR_FUSED: &str = "STRATA_GR_FUSED";
pub const FUSED: &str = "STRATA_FUSED";
pub const GROUP_PRODUCTS: &str = "STRATA_GROUP_PRODUCTS";
pub const FOLD_NORMS: &str = "STRATA_FOLD_NORMS";
pub const XSTAGE: &str = "STRATA_XSTAGE";
pub const KEEP_GGUF: &str = "STRATA_KEEP_GGUF";
pub const MATMUL_TILE: &str = "STRATA_MATMUL_TILE";
pub const PIN_HOST: &str = "STRATA_PIN_HOST";

/// The formats with a tiled copy whose kernels take these fusions (engine/kernels/tiled.rs).
const TILED_32: &[&str] = &["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"];
/// The formats the integer-dot kernels take (engine/kernels/vnni.rs).
const INT_DOT: &[&str] = &[
    "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K",
];
/// The norm folds: the 32-block tiled formats (pre-norm sublayers) and the K-tiled ones
/// (post-normed sublayers, Gemma 3's).
const FOLDS: &[&str] = &[
    "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K",
];

const fn switch(default: bool) -> Kind {
    Kind::Switch { default }
}

const fn formats(f: &'static [&'static str]) -> Needs {
    Needs {
        formats: f,
        arch: None,
        hardware: Hardware::Any,
    }
}

/// A model path `make setup` writes into .strata/env (engine/paths.rs).
const fn setup_model(name: &'static str, help: &'static str) -> Flag {
    Flag {
        name,
        kind: Kind::Value {
            values: "a GGUF path",
            default: ".strata/env's entry",
        },
        bitwise: Bitwise::NoResult,
        scope: Scope::Setup,
        needs: Needs::ANY,
        toggle: false,
        help,
    }
}

const HC: Needs = Needs {
    formats: &[],
    // the architectures with hyper-connection streams
    arch: Some("qwen4exp|strata-hc-llama"),
    hardware: Hardware::Any,
};

pub const FLAGS: &[Flag] = &[
    Flag {
        name: VNNI,
        kind: switch(false),
        bitwise: Bitwise::No("logits within nmse 5.3e-3 of the default (Gemma 3; docs/flags.md)"),
        scope: Scope::Kernel,
        needs: Needs {
            formats: INT_DOT,
            arch: None,
            hardware: Hardware::CpuIntDot,
        },
        toggle: true,
        help: "integer-dot (AVX-512 VNNI / AVX2) matrix products on the CPU device, 4/5/6/8-bit",
    },
    Flag {
        name: MMVQ_KREG,
        kind: switch(false),
        bitwise: Bitwise::No(
            "another f32 summation order: greedy text may change after a near tie",
        ),
        scope: Scope::Kernel,
        needs: formats(&["Q4_K", "Q5_K", "Q6_K", "IQ4_XS"]),
        toggle: true,
        help: "KREG small-batch mat-vec kernels for Q4_K/Q5_K/Q6_K/IQ4_XS (the Arc GPU design)",
    },
    Flag {
        name: HC_Q8,
        kind: switch(false),
        // the read: engine/kernels/hc_fast.rs (`strata parity hc-q8 --selftest`)
        bitwise: Bitwise::No(
            "hyper-connection down/up projections rounded to Q8_0 (ggml's rounding), another \
             summation order; R_out bitwise",
        ),
        scope: Scope::Kernel,
        needs: HC,
        toggle: true,
        help:
            "read hyper-connection down/up projections as Q8_0 in the verify window (more memory)",
    },
    Flag {
        name: GR_FUSED,
        kind: switch(false),
        // the read: engine/kernels/hc_fast.rs (`strata parity gr-fused --selftest`)
        bitwise: Bitwise::No(
            "another summation order of the hyper-connection read (same weights); R_out bitwise",
        ),
        scope: Scope::Kernel,
        needs: HC,
        toggle: true,
        help: "two-kernel BF16 hyper-connection read (same weights, no extra memory)",
    },
    Flag {
        name: FUSED,
        kind: switch(true),
        bitwise: Bitwise::Yes,
        scope: Scope::Plan,
        needs: Needs::ANY,
        toggle: false,
        help: "fused small kernels: norm + rounding, activation + rounding, RoPE + KV store, \
               attention + rounding, product + residual add (0: the plain sequence)",
    },
    Flag {
        name: GROUP_PRODUCTS,
        kind: switch(true),
        bitwise: Bitwise::Yes,
        scope: Scope::Plan,
        needs: formats(TILED_32),
        toggle: false,
        help: "products of one input (q/k/v, gate/up) in one launch at decode rows",
    },
    Flag {
        name: FOLD_NORMS,
        kind: switch(true),
        bitwise: Bitwise::Yes,
        scope: Scope::Plan,
        needs: formats(FOLDS),
        toggle: false,
        help: "the residual add and the next norm folded into the output / down projection's \
               launch at decode rows",
    },
    Flag {
        name: XSTAGE,
        kind: switch(true),
        bitwise: Bitwise::Yes,
        scope: Scope::Plan,
        needs: formats(INT_DOT),
        toggle: false,
        help: "the rounding kernels stage their output for the decode products (fewer \
               instructions per weight block)",
    },
    Flag {
        name: KEEP_GGUF,
        kind: switch(false),
        bitwise: Bitwise::Yes,
        scope: Scope::Load,
        needs: Needs::ANY,
        toggle: false,
        help: "keep every matrix's GGUF bytes beside its tiled copy and read them where a kernel \
               can (up to twice the weight memory)",
    },
    Flag {
        name: MATMUL_TILE,
        kind: Kind::Value {
            values: "RGxTT: row groups 1-2, tokens 1-16, e.g. 2x8",
            default: "the device's tile",
        },
        bitwise: Bitwise::Yes,
        scope: Scope::Kernel,
        needs: Needs::ANY,
        toggle: false,
        help: "force the prompt matmul's register tile (A/B runs)",
    },
    Flag {
        name: PIN_HOST,
        kind: switch(true),
        bitwise: Bitwise::NoResult,
        scope: Scope::Runtime,
        needs: Needs {
            formats: &[],
            arch: None,
            hardware: Hardware::CpuDevice,
        },
        toggle: false,
        help: "pin the submitting thread off the OpenCL CPU runtime's worker CPUs",
    },
    Flag {
        name: "STRATA_KERNEL_CACHE",
        kind: switch(true),
        bitwise: Bitwise::NoResult,
        scope: Scope::Runtime,
        needs: Needs::ANY,
        toggle: false,
        help: "keep built kernels as device binaries (engine/sycl/binary_cache.rs); 0: build \
               every module from source",
    },
    Flag {
        name: "STRATA_KERNEL_CACHE_DIR",
        kind: Kind::Value {
            values: "a directory",
            default: "~/.cache/strata/kernel-cache",
        },
        bitwise: Bitwise::NoResult,
        scope: Scope::Runtime,
        needs: Needs::ANY,
        toggle: false,
        help: "where the kernel binary cache keeps its entries",
    },
    Flag {
        name: "SYCL_CACHE_PERSISTENT",
        kind: switch(true),
        bitwise: Bitwise::NoResult,
        scope: Scope::Runtime,
        needs: Needs::ANY,
        toggle: false,
        help: "the SYCL runtime's disk cache of built kernels (set to 1 when unset)",
    },
    Flag {
        name: "SYCL_CACHE_DIR",
        kind: Kind::Value {
            values: "a directory",
            default: "~/.cache/strata/sycl-cache",
        },
        bitwise: Bitwise::NoResult,
        scope: Scope::Runtime,
        needs: Needs::ANY,
        toggle: false,
        help: "where the SYCL runtime caches built kernels",
    },
    Flag {
        name: "OCL_ICD_FILENAMES",
        kind: Kind::Value {
            values: "paths of OpenCL drivers, ':'-separated",
            default: "the Intel OpenCL CPU driver of the runtime setup installed",
        },
        bitwise: Bitwise::NoResult,
        scope: Scope::Runtime,
        needs: Needs::ANY,
        toggle: false,
        help: "the OpenCL drivers the loader opens",
    },
    Flag {
        name: "CL_CONFIG_CPU_TARGET_ARCH",
        kind: Kind::Value {
            values: "an Intel OpenCL CPU target, e.g. core-avx2",
            default: "the host CPU",
        },
        bitwise: Bitwise::No("the kernels compiled for another instruction set"),
        scope: Scope::Runtime,
        needs: Needs {
            formats: &[],
            arch: None,
            hardware: Hardware::CpuDevice,
        },
        toggle: false,
        help: "the instruction set the CPU device compiles for (STRATA_VNNI's form follows it)",
    },
    setup_model(
        crate::paths::SMOLLM2_ENV,
        "SmolLM2-135M-Instruct as `make setup` installed it (the default model)",
    ),
    setup_model(
        crate::paths::GEMMA3_ENV,
        "Gemma 3 270M as `make setup` installed it",
    ),
    setup_model(
        crate::paths::SMOLLM2_HC_ENV,
        "SmolLM2 converted to hyper-connection streams (strata-hc-llama) by `make setup`",
    ),
];
