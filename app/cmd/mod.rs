//! One file per subcommand: its clap `Args` and its `run`.
pub mod devices;
pub mod engine;
pub mod inspect;
