//! Chat templates: render a model's `tokenizer.chat_template` (Jinja, as Hugging Face does) with
//! minijinja in a sandbox, or a built-in template when the model has none or its template fails.
//!
//! Sandbox: an instruction/memory budget (minijinja fuel), a recursion limit, an output-size cap,
//! no loader (no include/import of files), no access to Python internals (`__class__` and other
//! dunder names are rejected before rendering), and only the helpers HF templates use
//! (`raise_exception`, `strftime_now`, minijinja's filters incl. `tojson`, and a few Python string
//! and dict methods such as `.strip()` and `.items()`).

use std::io::Write;

use minijinja::value::{Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind, State};

use super::content::{Filled, Sentinels};
use super::Tokenizer;

/// One chat message. `role`: "system", "user" or "assistant".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role: role.into(),
            content: content.into(),
        }
    }
}

/// A built-in template, used when the model has none or its own fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Builtin {
    /// `<|im_start|>role\n...<|im_end|>\n`
    ChatMl,
    /// `<start_of_turn>user\n...<end_of_turn>\n`, assistant as "model", system folded into the
    /// first user turn.
    Gemma,
}

impl Builtin {
    pub fn name(self) -> &'static str {
        match self {
            Builtin::ChatMl => "chatml",
            Builtin::Gemma => "gemma",
        }
    }

    pub fn from_name(name: &str) -> Option<Builtin> {
        match name {
            "chatml" => Some(Builtin::ChatMl),
            "gemma" => Some(Builtin::Gemma),
            _ => None,
        }
    }

    fn end_of_turn(self) -> &'static str {
        match self {
            Builtin::ChatMl => "<|im_end|>",
            Builtin::Gemma => "<end_of_turn>",
        }
    }

    fn render(self, messages: &[ChatMessage], add_generation_prompt: bool) -> String {
        let mut out = String::new();
        match self {
            Builtin::ChatMl => {
                for m in messages {
                    out.push_str(&format!(
                        "<|im_start|>{}\n{}<|im_end|>\n",
                        m.role, m.content
                    ));
                }
                if add_generation_prompt {
                    out.push_str("<|im_start|>assistant\n");
                }
            }
            Builtin::Gemma => {
                let mut system: Option<&str> = None;
                for m in messages {
                    match m.role.as_str() {
                        "system" => system = Some(&m.content),
                        role => {
                            let role = if role == "assistant" { "model" } else { role };
                            out.push_str(&format!("<start_of_turn>{role}\n"));
                            if let Some(s) = system.take() {
                                out.push_str(s);
                                out.push_str("\n\n");
                            }
                            out.push_str(&m.content);
                            out.push_str("<end_of_turn>\n");
                        }
                    }
                }
                if let Some(s) = system {
                    // A system prompt with no user turn after it still reaches the model.
                    out.push_str(&format!("<start_of_turn>user\n{s}<end_of_turn>\n"));
                }
                if add_generation_prompt {
                    out.push_str("<start_of_turn>model\n");
                }
            }
        }
        out
    }
}

/// Why the model's template could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error("chat template rejected: it accesses Python internals (`{0}`)")]
    Forbidden(String),
    #[error("chat template: {0}")]
    Render(String),
    #[error("chat template output exceeds {0} bytes")]
    TooLarge(usize),
}

/// The result of rendering a conversation.
#[derive(Clone, Debug)]
pub struct RenderedChat {
    /// The prompt text; encode it with `Tokenizer::encode_chat`.
    pub prompt: String,
    /// Byte ranges of `prompt` that are message content (sorted, disjoint): control-token text
    /// there stays text unless the caller opts in. Everything else the template wrote.
    pub content: Vec<std::ops::Range<usize>>,
    /// Strings that end the assistant's turn (e.g. `<|im_end|>`), for text-level stopping.
    pub stops: Vec<String>,
    /// Token ids that end generation (EOS, EOT, ...).
    pub stop_ids: Vec<u32>,
    /// Set when a built-in template was used instead of the model's; show it to the user once.
    pub warning: Option<String>,
    /// "model" or the built-in's name.
    pub template_name: String,
}

/// Limits of one render.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// minijinja fuel: instructions plus ~64 bytes of allocation each.
    pub fuel: u64,
    pub recursion: usize,
    pub max_output: usize,
}

impl Limits {
    /// Budgets that scale with the conversation so long chats still render.
    pub fn for_messages(messages: &[ChatMessage]) -> Limits {
        let bytes: usize = messages
            .iter()
            .map(|m| m.content.len() + m.role.len())
            .sum();
        Limits {
            fuel: 1_000_000 + bytes as u64 / 8 + 200 * messages.len() as u64,
            recursion: 64,
            max_output: (1 << 20) + 4 * bytes,
        }
    }
}

pub struct ChatTemplate {
    source: Option<String>,
    fallback: Builtin,
    bos_token: String,
    eos_token: String,
    stops: Vec<String>,
    stop_ids: Vec<u32>,
}

impl ChatTemplate {
    /// The model's template (if any) with a fallback chosen from its vocabulary: Gemma turns when
    /// it has `<start_of_turn>`, else ChatML.
    pub fn from_tokenizer(tok: &Tokenizer) -> ChatTemplate {
        let fallback = if tok.token_id("<start_of_turn>").is_some() {
            Builtin::Gemma
        } else {
            Builtin::ChatMl
        };
        let text = |id: Option<u32>| {
            id.and_then(|i| tok.token_text(i))
                .map(|t| String::from_utf8_lossy(t).into_owned())
                .unwrap_or_default()
        };
        let stop_ids = tok.eog_ids().to_vec();
        let mut stops: Vec<String> = stop_ids
            .iter()
            .map(|&i| text(Some(i)))
            .filter(|s| !s.is_empty())
            .collect();
        let eot = fallback.end_of_turn().to_string();
        // The turn terminator first: it is what a chat stops on.
        stops.retain(|s| *s != eot);
        stops.insert(0, eot);
        ChatTemplate {
            source: tok.chat_template().map(str::to_string),
            fallback,
            bos_token: text(tok.bos()),
            eos_token: text(tok.eos()),
            stops,
            stop_ids,
        }
    }

    /// A template from explicit parts (tests, `--template` overrides).
    pub fn new(
        source: Option<String>,
        fallback: Builtin,
        bos_token: &str,
        eos_token: &str,
    ) -> ChatTemplate {
        ChatTemplate {
            source,
            fallback,
            bos_token: bos_token.into(),
            eos_token: eos_token.into(),
            stops: vec![fallback.end_of_turn().to_string()],
            stop_ids: Vec::new(),
        }
    }

    pub fn source(&self) -> Option<&str> {
        self.source.as_deref()
    }
    pub fn fallback(&self) -> Builtin {
        self.fallback
    }

    /// Renders with the model's template, falling back to the built-in one (with a warning) when
    /// there is none or it fails. Never fails. `content` in the result tells which bytes came from
    /// message content (`content.rs`), for `Tokenizer::encode_chat`.
    pub fn render(&self, messages: &[ChatMessage], add_generation_prompt: bool) -> RenderedChat {
        let texts = messages
            .iter()
            .flat_map(|m| [m.content.as_str(), m.role.as_str()]);
        let extra = [self.bos_token.as_str(), self.eos_token.as_str()];
        let sentinels = Sentinels::new(texts.chain(self.source.as_deref()).chain(extra));
        let stand_ins = sentinels.stand_ins(messages);
        let model = self.source.as_ref().map(|src| {
            let limits = Limits::for_messages(messages);
            let marked = self.render_source(src, &stand_ins, add_generation_prompt, limits)?;
            let real = self.render_source(src, messages, add_generation_prompt, limits)?;
            sentinels
                .fill(&marked, messages, Some(&real))
                .ok_or_else(|| TemplateError::Render("it cuts message content apart".into()))
        });
        let (filled, warning, name) = match model {
            Some(Ok(f)) => {
                let warning = (!f.exact).then(|| {
                    "chat template rewrites message content in a way that cannot be followed; \
                     the content is inserted as written"
                        .to_string()
                });
                (f, warning, "model".to_string())
            }
            None => self.builtin(
                &sentinels,
                messages,
                add_generation_prompt,
                "model has no chat template".into(),
            ),
            Some(Err(e)) => {
                self.builtin(&sentinels, messages, add_generation_prompt, e.to_string())
            }
        };
        RenderedChat {
            prompt: filled.prompt,
            content: filled.content,
            stops: self.stops.clone(),
            stop_ids: self.stop_ids.clone(),
            warning,
            template_name: name,
        }
    }

    /// The built-in template's rendering, with a warning saying `why` it is used.
    fn builtin(
        &self,
        sentinels: &Sentinels,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        why: String,
    ) -> (Filled, Option<String>, String) {
        let marked = self
            .fallback
            .render(&sentinels.stand_ins(messages), add_generation_prompt);
        // The built-ins write each content (sentinel) whole, never cut.
        let f = sentinels
            .fill(&marked, messages, None)
            .expect("built-in templates keep sentinels whole");
        let name = self.fallback.name();
        (
            f,
            Some(format!("{why}; using the built-in `{name}` template")),
            name.to_string(),
        )
    }

    /// Renders the model's template only (an error instead of the fallback).
    pub fn render_strict(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        limits: Limits,
    ) -> Result<String, TemplateError> {
        match &self.source {
            Some(src) => self.render_source(src, messages, add_generation_prompt, limits),
            None => Err(TemplateError::Render("model has no chat template".into())),
        }
    }

    fn render_source(
        &self,
        src: &str,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        limits: Limits,
    ) -> Result<String, TemplateError> {
        if let Some(name) = forbidden_name(src) {
            return Err(TemplateError::Forbidden(name));
        }
        let mut env = Environment::new();
        // Hugging Face renders with trim_blocks and lstrip_blocks on.
        let syntax = minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(|e| TemplateError::Render(e.to_string()))?;
        env.set_syntax(syntax);
        env.set_fuel(Some(limits.fuel));
        env.set_recursion_limit(limits.recursion);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", strftime_now);
        env.set_unknown_method_callback(py_method);
        let tmpl = env
            .template_from_str(src)
            .map_err(|e| TemplateError::Render(describe(&e)))?;
        let msgs: Vec<Value> = messages
            .iter()
            .map(|m| {
                let map: std::collections::BTreeMap<String, Value> = [
                    ("role".to_string(), Value::from(m.role.as_str())),
                    ("content".to_string(), Value::from(m.content.as_str())),
                ]
                .into_iter()
                .collect();
                Value::from(map)
            })
            .collect();
        let ctx = minijinja::context! {
            messages => Value::from(msgs),
            add_generation_prompt => add_generation_prompt,
            bos_token => self.bos_token.as_str(),
            eos_token => self.eos_token.as_str(),
        };
        let mut out = CappedWriter {
            buf: Vec::new(),
            cap: limits.max_output,
            overflow: false,
        };
        match tmpl.render_captured_to(ctx, &mut out) {
            Ok(_) => {}
            Err(_) if out.overflow => return Err(TemplateError::TooLarge(limits.max_output)),
            Err(e) => return Err(TemplateError::Render(describe(&e))),
        }
        String::from_utf8(out.buf).map_err(|_| TemplateError::Render("output is not UTF-8".into()))
    }
}

fn describe(e: &Error) -> String {
    match e.kind() {
        ErrorKind::OutOfFuel => "exceeded its instruction budget (infinite loop?)".to_string(),
        _ => {
            let mut s = e.to_string();
            let mut src = std::error::Error::source(e);
            while let Some(x) = src {
                s.push_str(": ");
                s.push_str(&x.to_string());
                src = x.source();
            }
            s
        }
    }
}

/// Finds a dunder name (`__class__`, `__globals__`...) inside `{{ }}` / `{% %}` tags.
fn forbidden_name(src: &str) -> Option<String> {
    let mut rest = src;
    while let Some(open) = rest.find(['{']) {
        let after = &rest[open + 1..];
        let close = match after.chars().next() {
            Some('{') => "}}",
            Some('%') => "%}",
            _ => {
                rest = after;
                continue;
            }
        };
        let end = after.find(close).unwrap_or(after.len());
        let tag = &after[..end];
        if let Some(i) = tag.find("__") {
            let name: String = tag[i..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            return Some(name);
        }
        rest = &after[end..];
    }
    None
}

/// Collects output, failing the render once `cap` bytes would be exceeded.
struct CappedWriter {
    buf: Vec<u8>,
    cap: usize,
    overflow: bool,
}

impl Write for CappedWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if self.buf.len() + data.len() > self.cap {
            self.overflow = true;
            return Err(std::io::Error::other("chat template output too large"));
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn raise_exception(msg: String) -> Result<Value, Error> {
    Err(Error::new(
        ErrorKind::InvalidOperation,
        format!("template raised: {msg}"),
    ))
}

/// `strftime_now(fmt)` in UTC, supporting the directives HF templates use.
fn strftime_now(fmt: String) -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    format_time(secs, &fmt)
}

pub(crate) fn format_time(secs: i64, fmt: &str) -> String {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    const DAYS: [&str; 7] = [
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
        "Monday",
        "Tuesday",
        "Wednesday",
    ];
    let days = secs.div_euclid(86_400);
    let tod = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    let wd = DAYS[days.rem_euclid(7) as usize];
    let mn = MONTHS[(m - 1) as usize];
    let mut out = String::new();
    let mut it = fmt.chars();
    while let Some(c) = it.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('Y') => out.push_str(&y.to_string()),
            Some('y') => out.push_str(&format!("{:02}", y.rem_euclid(100))),
            Some('m') => out.push_str(&format!("{m:02}")),
            Some('d') => out.push_str(&format!("{d:02}")),
            Some('e') => out.push_str(&format!("{d:2}")),
            Some('-') => match it.next() {
                Some('d') => out.push_str(&d.to_string()),
                Some('m') => out.push_str(&m.to_string()),
                Some(o) => {
                    out.push_str("%-");
                    out.push(o)
                }
                None => out.push_str("%-"),
            },
            Some('B') => out.push_str(mn),
            Some('b') => out.push_str(&mn[..3]),
            Some('A') => out.push_str(wd),
            Some('a') => out.push_str(&wd[..3]),
            Some('H') => out.push_str(&format!("{:02}", tod / 3600)),
            Some('M') => out.push_str(&format!("{:02}", tod / 60 % 60)),
            Some('S') => out.push_str(&format!("{:02}", tod % 60)),
            Some('%') => out.push('%'),
            Some(o) => {
                out.push('%');
                out.push(o);
            }
            None => out.push('%'),
        }
    }
    out
}

/// The Python methods HF templates call on strings and dicts.
fn py_method(
    _state: &mut State,
    value: &Value,
    method: &str,
    args: &[Value],
) -> Result<Value, Error> {
    let arg_str = |i: usize| args.get(i).and_then(|a| a.as_str().map(str::to_string));
    if let Some(s) = value.as_str() {
        let chars = arg_str(0);
        let set = |c: char| {
            chars
                .as_deref()
                .map_or(c.is_whitespace(), |cs| cs.contains(c))
        };
        return Ok(match method {
            "strip" => Value::from(s.trim_matches(set)),
            "lstrip" => Value::from(s.trim_start_matches(set)),
            "rstrip" => Value::from(s.trim_end_matches(set)),
            "startswith" => Value::from(args.first().is_some_and(|a| prefix_match(s, a, true))),
            "endswith" => Value::from(args.first().is_some_and(|a| prefix_match(s, a, false))),
            "upper" => Value::from(s.to_uppercase()),
            "lower" => Value::from(s.to_lowercase()),
            "title" | "capitalize" => {
                let mut c = s.chars();
                Value::from(
                    c.next()
                        .map(|f| {
                            f.to_uppercase()
                                .chain(c.flat_map(|x| x.to_lowercase()))
                                .collect::<String>()
                        })
                        .unwrap_or_default(),
                )
            }
            "replace" => match (arg_str(0), arg_str(1)) {
                (Some(a), Some(b)) if !a.is_empty() => Value::from(s.replace(&a, &b)),
                _ => Value::from(s),
            },
            "split" => {
                let parts: Vec<Value> = match arg_str(0) {
                    Some(sep) if !sep.is_empty() => {
                        s.split(sep.as_str()).map(Value::from).collect()
                    }
                    _ => s.split_whitespace().map(Value::from).collect(),
                };
                Value::from(parts)
            }
            "find" => Value::from(
                arg_str(0)
                    .and_then(|a| s.find(&a))
                    .map_or(-1, |i| s[..i].chars().count() as i64),
            ),
            _ => {
                return Err(Error::new(
                    ErrorKind::UnknownMethod,
                    format!("string has no method `{method}`"),
                ))
            }
        });
    }
    if value.kind() == ValueKind::Map {
        return match method {
            "items" => {
                let mut v = Vec::new();
                for k in value.try_iter()? {
                    let item = value.get_item(&k)?;
                    v.push(Value::from(vec![k, item]));
                }
                Ok(Value::from(v))
            }
            "keys" => Ok(Value::from(value.try_iter()?.collect::<Vec<_>>())),
            "values" => Ok(Value::from(
                value
                    .try_iter()?
                    .map(|k| value.get_item(&k))
                    .collect::<Result<Vec<_>, _>>()?,
            )),
            "get" => {
                let k = args.first().cloned().unwrap_or(Value::UNDEFINED);
                let v = value.get_item(&k)?;
                Ok(if v.is_undefined() {
                    args.get(1).cloned().unwrap_or(Value::from(()))
                } else {
                    v
                })
            }
            _ => Err(Error::new(
                ErrorKind::UnknownMethod,
                format!("dict has no method `{method}`"),
            )),
        };
    }
    Err(Error::new(
        ErrorKind::UnknownMethod,
        format!("{} has no method `{method}`", value.kind()),
    ))
}

fn prefix_match(s: &str, a: &Value, prefix: bool) -> bool {
    let test = |p: &str| {
        if prefix {
            s.starts_with(p)
        } else {
            s.ends_with(p)
        }
    };
    if let Some(p) = a.as_str() {
        return test(p);
    }
    // Python accepts a tuple of prefixes.
    a.try_iter()
        .map(|mut it| it.any(|x| x.as_str().is_some_and(test)))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_formatting() {
        // 2024-02-29 13:05:09 UTC, a Thursday.
        assert_eq!(
            format_time(1_709_211_909, "%d %B %Y %H:%M:%S %a"),
            "29 February 2024 13:05:09 Thu"
        );
        assert_eq!(format_time(0, "%Y-%m-%d %A"), "1970-01-01 Thursday");
    }

    #[test]
    fn dunder_detection() {
        assert_eq!(
            forbidden_name("{{ ''.__class__ }}"),
            Some("__class__".into())
        );
        assert_eq!(forbidden_name("text __init__ {{ x }}"), None);
    }
}
