//! Pre-tokenizers of gpt2-type tokenizers: split text into words before BPE, as llama.cpp does
//! for `tokenizer.ggml.pre`. Hand-written scanners instead of a regex engine: the GPT-2 pattern
//! needs a `(?!\S)` lookahead, and a scanner over pre-classified chars is faster anyway.

use std::ops::Range;

use super::error::TokenizerError;
use super::unicode::{is_letter, is_number, is_space};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PreTokenizer {
    /// `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
    Gpt2,
    /// `\p{N}` (every digit alone) first, then the GPT-2 pattern inside each piece
    /// (llama.cpp's choice for smollm, starcoder, refact, command-r, codeshell, exaone, minerva).
    DigitsThenGpt2,
}

impl PreTokenizer {
    pub fn from_name(pre: Option<&str>) -> Result<PreTokenizer, TokenizerError> {
        match pre.unwrap_or("default") {
            "default" | "gpt2" | "gpt-2" | "mpt" | "olmo" | "jais" => Ok(PreTokenizer::Gpt2),
            "smollm" | "starcoder" | "refact" | "command-r" | "codeshell" | "exaone"
            | "minerva" => Ok(PreTokenizer::DigitsThenGpt2),
            other => Err(TokenizerError::UnknownPre(other.to_string())),
        }
    }

    /// Splits `text` into words, appending their byte ranges to `out` (in order, covering `text`).
    pub fn split(&self, text: &str, out: &mut Vec<Range<usize>>) {
        let chars: Vec<Ch> = text
            .char_indices()
            .map(|(at, c)| Ch {
                at,
                class: classify(c),
                c,
            })
            .collect();
        let end_byte = text.len();
        let byte_at = |i: usize| {
            if i < chars.len() {
                chars[i].at
            } else {
                end_byte
            }
        };
        let mut emit = |a: usize, b: usize| out.push(byte_at(a)..byte_at(b));
        match self {
            PreTokenizer::Gpt2 => gpt2(&chars, 0, chars.len(), &mut emit),
            PreTokenizer::DigitsThenGpt2 => {
                let mut start = 0;
                for i in 0..chars.len() {
                    if chars[i].class == Class::Number {
                        if start < i {
                            gpt2(&chars, start, i, &mut emit);
                        }
                        emit(i, i + 1);
                        start = i + 1;
                    }
                }
                if start < chars.len() {
                    gpt2(&chars, start, chars.len(), &mut emit);
                }
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Letter,
    Number,
    Space,
    Other,
}

fn classify(c: char) -> Class {
    if is_space(c) {
        Class::Space
    } else if is_letter(c) {
        Class::Letter
    } else if is_number(c) {
        Class::Number
    } else {
        Class::Other
    }
}

struct Ch {
    at: usize,
    class: Class,
    c: char,
}

/// The GPT-2 pattern over chars `[ini, end)`; `emit(a, b)` receives char-index ranges.
fn gpt2(ch: &[Ch], ini: usize, end: usize, emit: &mut impl FnMut(usize, usize)) {
    // Class of char `i`, or None past the piece (the lookahead must not see the next piece).
    let class = |i: usize| if i < end { Some(ch[i].class) } else { None };
    let mut pos = ini;
    while pos < end {
        let c = ch[pos].c;
        if c == '\'' && pos + 1 < end {
            let n = ch[pos + 1].c;
            if matches!(n, 's' | 't' | 'm' | 'd') {
                emit(pos, pos + 2);
                pos += 2;
                continue;
            }
            if pos + 2 < end {
                let nn = ch[pos + 2].c;
                if matches!((n, nn), ('r', 'e') | ('v', 'e') | ('l', 'l')) {
                    emit(pos, pos + 3);
                    pos += 3;
                    continue;
                }
            }
        }
        // ` ?X+`: an optional single space glued to a run of letters, numbers or other symbols.
        let lead = if c == ' ' { class(pos + 1) } else { class(pos) };
        if let Some(k @ (Class::Letter | Class::Number | Class::Other)) = lead {
            let start = pos;
            if c == ' ' {
                pos += 1;
            }
            while class(pos) == Some(k) {
                pos += 1;
            }
            emit(start, pos);
            continue;
        }
        let mut n_space = 0;
        while class(pos + n_space) == Some(Class::Space) {
            n_space += 1;
        }
        if n_space > 1 && pos + n_space < end {
            // `\s+(?!\S)`: leave the last space to lead the following word.
            emit(pos, pos + n_space - 1);
            pos += n_space - 1;
            continue;
        }
        if n_space > 0 {
            emit(pos, pos + n_space);
            pos += n_space;
            continue;
        }
        emit(pos, pos + 1);
        pos += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(p: PreTokenizer, s: &str) -> Vec<&str> {
        let mut r = Vec::new();
        p.split(s, &mut r);
        r.into_iter().map(|x| &s[x]).collect()
    }

    #[test]
    fn gpt2_splits() {
        let p = PreTokenizer::Gpt2;
        assert_eq!(
            words(p, "Hello world's  end!!\n"),
            vec!["Hello", " world", "'s", " ", " end", "!!", "\n"]
        );
        assert_eq!(words(p, "a   "), vec!["a", "   "]);
        assert_eq!(words(p, " 123 abc"), vec![" 123", " abc"]);
        assert_eq!(words(p, "x\n\ny"), vec!["x", "\n", "\n", "y"]);
    }

    #[test]
    fn smollm_isolates_digits() {
        let p = PreTokenizer::DigitsThenGpt2;
        assert_eq!(
            words(p, "in 2024, x1"),
            vec!["in", " ", "2", "0", "2", "4", ",", " x", "1"]
        );
    }
}
