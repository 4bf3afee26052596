//! One file per subcommand: its clap `Args` and its `run`.
pub mod devices;
pub mod engine;
pub mod inspect;
pub mod tokenize;
pub mod bench;
pub mod engine_args;
pub mod nll;
pub mod run;
