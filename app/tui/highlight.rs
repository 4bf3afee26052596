//! A small hand-written syntax highlighter for fenced code blocks: keywords, strings, numbers,
//! comments and type-like names for a handful of languages. It is line-based with one bit of
//! state (inside a block comment), which is all a chat reply needs; a full grammar engine
//! (syntect) would cost more build time than the whole TUI on this machine.

use ratatui::style::Style;
use ratatui::text::Span;

use super::theme;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lang {
    keywords: &'static [&'static str],
    line_comment: &'static [&'static str],
    block_comment: Option<(&'static str, &'static str)>,
    quotes: &'static [char],
    rust_lifetimes: bool,
}

const RUST_KW: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern",
    "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub",
    "ref", "return", "self", "Self", "static", "struct", "super", "trait", "true", "type",
    "unsafe", "use", "where", "while",
];
const PY_KW: &[&str] = &[
    "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif",
    "else", "except", "False", "finally", "for", "from", "global", "if", "import", "in", "is",
    "lambda", "None", "nonlocal", "not", "or", "pass", "raise", "return", "True", "try", "while",
    "with", "yield",
];
const C_KW: &[&str] = &[
    "auto",
    "bool",
    "break",
    "case",
    "char",
    "class",
    "const",
    "constexpr",
    "continue",
    "default",
    "delete",
    "do",
    "double",
    "else",
    "enum",
    "export",
    "extends",
    "false",
    "final",
    "float",
    "for",
    "func",
    "function",
    "go",
    "if",
    "import",
    "int",
    "interface",
    "let",
    "long",
    "namespace",
    "new",
    "null",
    "nullptr",
    "package",
    "private",
    "protected",
    "public",
    "return",
    "short",
    "signed",
    "static",
    "struct",
    "switch",
    "template",
    "this",
    "throw",
    "true",
    "try",
    "catch",
    "typedef",
    "typename",
    "unsigned",
    "using",
    "var",
    "void",
    "volatile",
    "while",
    "async",
    "await",
    "const",
    "type",
    "defer",
    "range",
    "chan",
    "map",
    "undefined",
];
const SH_KW: &[&str] = &[
    "if", "then", "else", "elif", "fi", "for", "while", "do", "done", "case", "esac", "in",
    "function", "return", "export", "local", "set", "echo", "cd", "exit",
];
const DATA_KW: &[&str] = &["true", "false", "null"];

pub const RUST: Lang = Lang {
    keywords: RUST_KW,
    line_comment: &["//"],
    block_comment: Some(("/*", "*/")),
    quotes: &['"', '\''],
    rust_lifetimes: true,
};
pub const PYTHON: Lang = Lang {
    keywords: PY_KW,
    line_comment: &["#"],
    block_comment: None,
    quotes: &['"', '\''],
    rust_lifetimes: false,
};
pub const C_LIKE: Lang = Lang {
    keywords: C_KW,
    line_comment: &["//"],
    block_comment: Some(("/*", "*/")),
    quotes: &['"', '\'', '`'],
    rust_lifetimes: false,
};
pub const SHELL: Lang = Lang {
    keywords: SH_KW,
    line_comment: &["#"],
    block_comment: None,
    quotes: &['"', '\''],
    rust_lifetimes: false,
};
pub const DATA: Lang = Lang {
    keywords: DATA_KW,
    line_comment: &["#"],
    block_comment: None,
    quotes: &['"', '\''],
    rust_lifetimes: false,
};
pub const PLAIN: Lang = Lang {
    keywords: &[],
    line_comment: &[],
    block_comment: None,
    quotes: &[],
    rust_lifetimes: false,
};

/// The language for a fence's info string (`rust`, `py`, `c++`, ...); unknown ones stay plain.
pub fn lang_for(info: &str) -> Lang {
    let tag = info
        .split(|c: char| c.is_whitespace() || c == ',')
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    match tag.as_str() {
        "rust" | "rs" => RUST,
        "python" | "py" | "python3" => PYTHON,
        "c" | "h" | "cpp" | "c++" | "cc" | "hpp" | "java" | "js" | "javascript" | "ts"
        | "typescript" | "go" | "cuda" | "sycl" | "cs" | "kotlin" | "swift" => C_LIKE,
        "sh" | "bash" | "shell" | "zsh" | "console" => SHELL,
        "json" | "toml" | "yaml" | "yml" | "ini" => DATA,
        _ => PLAIN,
    }
}

/// Carried from one line of a block to the next.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct State {
    in_block_comment: bool,
}

fn push(out: &mut Vec<Span<'static>>, text: &str, style: Style) {
    if text.is_empty() {
        return;
    }
    // Merge with the previous span of the same style to keep lines short.
    if let Some(last) = out.last_mut() {
        if last.style == style {
            last.content.to_mut().push_str(text);
            return;
        }
    }
    out.push(Span::styled(text.to_string(), style));
}

/// Highlights one line (without its newline).
pub fn line(lang: Lang, text: &str, state: &mut State) -> Vec<Span<'static>> {
    let mut out = Vec::new();
    let b = text.as_bytes();
    let mut i = 0;
    while i < text.len() {
        let rest = &text[i..];
        if state.in_block_comment {
            let (_, end) = lang.block_comment.unwrap_or(("", ""));
            match rest.find(end) {
                Some(p) if !end.is_empty() => {
                    push(&mut out, &rest[..p + end.len()], theme::CODE_COMMENT);
                    i += p + end.len();
                    state.in_block_comment = false;
                }
                _ => {
                    push(&mut out, rest, theme::CODE_COMMENT);
                    break;
                }
            }
            continue;
        }
        if lang.line_comment.iter().any(|c| rest.starts_with(c)) {
            push(&mut out, rest, theme::CODE_COMMENT);
            break;
        }
        if let Some((start, _)) = lang.block_comment {
            if rest.starts_with(start) {
                push(&mut out, start, theme::CODE_COMMENT);
                i += start.len();
                state.in_block_comment = true;
                continue;
            }
        }
        // The loop only stops on char boundaries, so `rest` is non-empty and starts with a char.
        let c = rest.chars().next().expect("non-empty rest");
        if lang.quotes.contains(&c) {
            if lang.rust_lifetimes && c == '\'' && is_lifetime(rest) {
                let n = 1 + ident_len(&rest[1..]);
                push(&mut out, &rest[..n], theme::CODE_TYPE);
                i += n;
                continue;
            }
            let n = string_len(rest, c);
            push(&mut out, &rest[..n], theme::CODE_STRING);
            i += n;
        } else if c.is_ascii_digit() && (i == 0 || !is_ident(b[i - 1] as char)) {
            let n = rest
                .find(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '.' || ch == '_'))
                .unwrap_or(rest.len());
            push(&mut out, &rest[..n], theme::CODE_NUMBER);
            i += n;
        } else if c.is_alphabetic() || c == '_' {
            let n = ident_len(rest);
            let word = &rest[..n];
            let style = if lang.keywords.contains(&word) {
                theme::CODE_KEYWORD
            } else if word.starts_with(|ch: char| ch.is_uppercase())
                && lang.keywords != PLAIN.keywords
            {
                theme::CODE_TYPE
            } else {
                theme::CODE
            };
            push(&mut out, word, style);
            i += n;
        } else if c.is_whitespace() {
            push(&mut out, &rest[..c.len_utf8()], theme::CODE);
            i += c.len_utf8();
        } else {
            let style = if lang.keywords.is_empty() {
                theme::CODE
            } else {
                theme::CODE_PUNCT
            };
            push(&mut out, &rest[..c.len_utf8()], style);
            i += c.len_utf8();
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn ident_len(s: &str) -> usize {
    s.find(|c: char| !is_ident(c)).unwrap_or(s.len())
}

/// `'a` (lifetime) rather than `'a'` or `'\n'` (char literal).
fn is_lifetime(s: &str) -> bool {
    let mut it = s.chars().skip(1);
    match (it.next(), it.next()) {
        (Some(c), Some(next)) => (c.is_alphabetic() || c == '_') && next != '\'',
        (Some(c), None) => c.is_alphabetic(),
        _ => false,
    }
}

/// Bytes of the string literal at the start of `s` (to the closing quote, or the end of line).
fn string_len(s: &str, quote: char) -> usize {
    let mut escaped = false;
    for (i, c) in s.char_indices().skip(1) {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == quote {
            return i + c.len_utf8();
        }
    }
    s.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn styled(lang: Lang, text: &str) -> Vec<(String, Style)> {
        let mut st = State::default();
        line(lang, text, &mut st)
            .into_iter()
            .map(|s| (s.content.into_owned(), s.style))
            .collect()
    }

    fn style_of(spans: &[(String, Style)], text: &str) -> Style {
        spans
            .iter()
            .find(|(t, _)| t.contains(text))
            .map(|(_, s)| *s)
            .unwrap_or_else(|| panic!("{text} not in {spans:?}"))
    }

    #[test]
    fn rust_line_parts() {
        let s = styled(RUST, "fn main<'a>() { let x = \"a // b\"; 42 } // done");
        assert_eq!(style_of(&s, "fn"), theme::CODE_KEYWORD);
        assert_eq!(style_of(&s, "'a"), theme::CODE_TYPE);
        assert_eq!(style_of(&s, "\"a // b\""), theme::CODE_STRING);
        assert_eq!(style_of(&s, "42"), theme::CODE_NUMBER);
        assert_eq!(style_of(&s, "// done"), theme::CODE_COMMENT);
        let joined: String = s.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(
            joined, "fn main<'a>() { let x = \"a // b\"; 42 } // done",
            "no text lost"
        );
    }

    #[test]
    fn block_comment_spans_lines() {
        let mut st = State::default();
        let a = line(C_LIKE, "int x; /* start", &mut st);
        assert_eq!(a.last().unwrap().style, theme::CODE_COMMENT);
        let b = line(C_LIKE, "still */ return x2;", &mut st);
        assert_eq!(b[0].content, "still */");
        assert_eq!(b[0].style, theme::CODE_COMMENT);
        assert!(b
            .iter()
            .any(|s| s.content == "return" && s.style == theme::CODE_KEYWORD));
        assert!(
            b.iter()
                .any(|s| s.content.trim() == "x2" && s.style == theme::CODE),
            "x2 is not a number: {b:?}"
        );
    }

    #[test]
    fn languages_by_fence() {
        assert_eq!(lang_for("rust,ignore"), RUST);
        assert_eq!(lang_for("Python"), PYTHON);
        assert_eq!(lang_for("cpp"), C_LIKE);
        assert_eq!(lang_for(""), PLAIN);
        let s = styled(PYTHON, "def f(): return None  # x");
        assert_eq!(style_of(&s, "def"), theme::CODE_KEYWORD);
        assert_eq!(style_of(&s, "# x"), theme::CODE_COMMENT);
    }
}
