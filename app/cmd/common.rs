//! What the subcommands share: the model file opened with one clear error per problem, and
//! stdout as a writer whose failures are errors instead of `println!`'s panic.

use anyhow::{anyhow, Context, Result};
use std::io::{self, Write};
use std::path::Path;
use strata::gguf::{Gguf, GgufError};
use strata::tokenizer::{Tokenizer, TokenizerError, TokenizerSpec};

/// Opens a GGUF file. One that cannot be read at all is one line naming it ("cannot read /nope:
/// No such file or directory (os error 2)"); any other problem is the reader's error, which
/// names the file and the field.
pub fn open_gguf(path: &Path) -> Result<Gguf> {
    Gguf::open(path).map_err(|e| match e {
        GgufError::InFile { path, error } => match *error {
            GgufError::Io(io) => anyhow!("cannot read {}: {io}", path.display()),
            error => GgufError::InFile {
                path,
                error: Box::new(error),
            }
            .into(),
        },
        e => e.into(),
    })
}

/// The tokenizer of an opened GGUF file; every error names the file once.
pub fn tokenizer(g: &Gguf, path: &Path) -> Result<Tokenizer> {
    let tok = TokenizerSpec::from_gguf(g).and_then(|spec| Tokenizer::from_spec(&spec));
    match tok {
        Ok(t) => Ok(t),
        // these two already start with the file's path
        Err(e @ (TokenizerError::Io { .. } | TokenizerError::Gguf { .. })) => Err(e.into()),
        Err(e) => Err(e).with_context(|| format!("{}: tokenizer", path.display())),
    }
}

/// `open_gguf` then `tokenizer`.
pub fn tokenizer_of(path: &Path) -> Result<Tokenizer> {
    tokenizer(&open_gguf(path)?, path)
}

/// stdout for a subcommand's report. Every failed write is an error reading "writing to stdout:
/// ...": a closed pipe (`strata inspect FILE --tensors | head -1`) ends the command there with
/// that one line on stderr and exit status 1, as `strata run` does, where `println!` panicked.
pub struct Stdout<W: Write = io::Stdout>(W);

/// Line at a time (what `println!` did): progress shows as it is printed.
pub fn stdout() -> Stdout {
    Stdout(io::stdout())
}

/// Block-buffered, for long listings. Call `flush` at the end: dropping it ignores errors.
pub fn stdout_buffered() -> Stdout<io::BufWriter<io::Stdout>> {
    Stdout(io::BufWriter::new(io::stdout()))
}

fn writing(e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("writing to stdout: {e}"))
}

impl<W: Write> Write for Stdout<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf).map_err(writing)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush().map_err(writing)
    }
}
