//! One file per subcommand: its clap `Args` and its `run`.
pub mod devices;
pub mod inspect;
pub mod parity;
