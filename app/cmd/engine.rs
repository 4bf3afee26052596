//! `strata engine`: the inference engine process the TUI runs as its child. JSON-line requests
//! on stdin, events on stdout (docs/protocol.md); logs on stderr.

use anyhow::Result;

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_args: Args) -> Result<()> {
    let out = strata::server::Out::new(Box::new(std::io::stdout()));
    let status = strata::server::serve(std::io::stdin().lock(), out);
    std::process::exit(status);
}
