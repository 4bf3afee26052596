//! One file per subcommand: its clap `Args` and its `run`.
pub mod bench;
pub mod devices;
pub mod engine;
pub mod engine_args;
pub mod inspect;
pub mod nll;
pub mod run;
pub mod tokenize;
