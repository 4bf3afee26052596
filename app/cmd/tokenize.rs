//! `strata tokenize`: a debugging view of a model's tokenizer and chat template.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context};
use strata::tokenizer::{ChatMessage, ChatTemplate, TokenType};

use super::common;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// GGUF model file whose tokenizer to use.
    #[arg(short = 'm', long = "model")]
    model: PathBuf,
    /// Text to tokenize.
    #[arg(long, conflicts_with = "file")]
    text: Option<String>,
    /// Read the text from a file.
    #[arg(long)]
    file: Option<PathBuf>,
    /// Print only the ids, space-separated.
    #[arg(long)]
    ids: bool,
    /// Treat the text as a user message: render the chat template, then tokenize the prompt.
    #[arg(long)]
    chat: bool,
    /// System prompt for --chat.
    #[arg(long, requires = "chat")]
    system: Option<String>,
    /// Do not add BOS/EOS (plain text mode).
    #[arg(long)]
    no_bos: bool,
    /// Recognise control-token text such as <|im_start|> in the text as control tokens. Off: it is
    /// plain text, and with --chat only the template's own markers are control tokens.
    #[arg(long)]
    parse_special: bool,
    /// Decode these space-separated ids (each below the vocabulary size) instead of tokenizing.
    #[arg(long, conflicts_with_all = ["text", "file", "chat"])]
    decode: Option<String>,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let tok = common::tokenizer_of(&a.model)?;
    let mut out = common::stdout_buffered();
    if let Some(list) = &a.decode {
        let n_vocab = tok.vocab_size();
        let ids = list
            .split_whitespace()
            .map(|s| {
                let id = s
                    .parse::<u32>()
                    .with_context(|| format!("--decode: `{s}` is not a token id"))?;
                if id as usize >= n_vocab {
                    bail!(
                        "--decode: token id {id} is out of range: the vocabulary of {} has {n_vocab} \
                         tokens (ids 0 to {})",
                        a.model.display(),
                        n_vocab.saturating_sub(1)
                    );
                }
                Ok(id)
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        writeln!(out, "{}", tok.decode(&ids, true))?;
        out.flush()?;
        return Ok(());
    }
    let text = match (&a.text, &a.file) {
        (Some(t), _) => t.clone(),
        (None, Some(f)) => {
            std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?
        }
        (None, None) => bail!("give --text TEXT or --file FILE (or --decode IDS)"),
    };
    let ids = if a.chat {
        let mut msgs = Vec::new();
        if let Some(s) = &a.system {
            msgs.push(ChatMessage::new("system", s.as_str()));
        }
        msgs.push(ChatMessage::new("user", text.as_str()));
        let r = ChatTemplate::from_tokenizer(&tok).render(&msgs, true);
        if let Some(w) = &r.warning {
            eprintln!("warning: {w}");
        }
        if !a.ids {
            writeln!(
                out,
                "template: {}\nstops: {:?} (ids {:?})\n--- prompt ---\n{}--- end ---",
                r.template_name, r.stops, r.stop_ids, r.prompt
            )?;
        }
        tok.encode_chat(&r, a.parse_special)
    } else {
        tok.encode(&text, !a.no_bos, a.parse_special)
    };
    if a.ids {
        let s: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
        writeln!(out, "{}", s.join(" "))?;
    } else {
        writeln!(out, "{} tokens", ids.len())?;
        for id in &ids {
            let ty = tok.token_type(*id).unwrap_or(TokenType::Undefined);
            let piece = String::from_utf8_lossy(tok.piece(*id, true)).into_owned();
            writeln!(out, "{id:>8}  {:<11} {:?}", format!("{ty:?}"), piece)?;
        }
    }
    out.flush()?;
    Ok(())
}
