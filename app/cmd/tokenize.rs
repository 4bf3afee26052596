//! `strata tokenize`: a debugging view of a model's tokenizer and chat template.

use std::path::PathBuf;

use anyhow::{bail, Context};
use strata::tokenizer::{ChatMessage, ChatTemplate, TokenType, Tokenizer};

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
    /// Recognise control-token text such as <|im_start|> (plain text mode).
    #[arg(long)]
    parse_special: bool,
    /// Decode these space-separated ids instead of tokenizing.
    #[arg(long, conflicts_with_all = ["text", "file", "chat"])]
    decode: Option<String>,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let tok = Tokenizer::from_gguf_path(&a.model)
        .with_context(|| format!("loading tokenizer of {}", a.model.display()))?;
    if let Some(list) = &a.decode {
        let ids = list
            .split_whitespace()
            .map(|s| {
                s.parse::<u32>()
                    .with_context(|| format!("--decode: `{s}` is not a token id"))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        println!("{}", tok.decode(&ids, true));
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
            println!(
                "template: {}\nstops: {:?} (ids {:?})\n--- prompt ---\n{}--- end ---",
                r.template_name, r.stops, r.stop_ids, r.prompt
            );
        }
        tok.encode_prompt(&r.prompt)
    } else {
        tok.encode(&text, !a.no_bos, a.parse_special)
    };
    if a.ids {
        let s: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
        println!("{}", s.join(" "));
        return Ok(());
    }
    println!("{} tokens", ids.len());
    for id in &ids {
        let ty = tok.token_type(*id).unwrap_or(TokenType::Undefined);
        let piece = String::from_utf8_lossy(tok.piece(*id, true)).into_owned();
        println!("{id:>8}  {:<11} {:?}", format!("{ty:?}"), piece);
    }
    Ok(())
}
