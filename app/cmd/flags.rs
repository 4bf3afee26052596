//! `strata flags`: every environment variable the engine reads, from the engine's registry
//! (engine/flags/): its value in this shell, default, values, whether it is bitwise, what it
//! applies to, and its help. `--markdown` prints docs/flags.md's table.

use super::common;
use anyhow::Result;
use std::io::Write;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print the Markdown table docs/flags.md carries instead of the listing.
    #[arg(long)]
    pub markdown: bool,
}

pub fn run(a: Args) -> Result<()> {
    let text = if a.markdown {
        strata::flags::doc::markdown()
    } else {
        strata::flags::doc::listing()
    };
    write!(common::stdout(), "{text}")?;
    Ok(())
}
