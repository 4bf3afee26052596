//! One file per subcommand: its clap `Args` and its `run` (`common`: what they share).
pub mod ab;
pub mod bench;
pub mod common;
pub mod convert;
pub mod devices;
pub mod engine;
pub mod engine_args;
pub mod flags;
pub mod inspect;
pub mod kld;
pub mod nll;
pub mod parity;
pub mod run;
pub mod synth;
pub mod tokenize;
