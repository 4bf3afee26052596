//! Which bytes of a rendered chat prompt are message content (and so must never become control
//! tokens) and which the template itself wrote.
//!
//! The template renders twice: once with each message's content replaced by a sentinel (a private-
//! use character absent from every input, the message index, the character again), once with the
//! real content. In the sentinel rendering everything but the sentinels is the template's own
//! text; filling each sentinel with the content gives the prompt and the content's byte ranges.
//! Templates often trim content (`| trim`, `.strip()`), so each sentinel is filled with whichever
//! of the content, trimmed, left- or right-trimmed, makes the result agree with the real
//! rendering. When none does (a template that rewrites content in other ways), the content is
//! inserted verbatim and the caller warns: the ranges are still exact, the prompt differs from
//! the model's template there.

use std::ops::Range;

use super::template::ChatMessage;

/// The sentinel marker: a private-use character that occurs in none of the texts rendered.
pub(super) struct Sentinels {
    mark: char,
}

/// One part of a sentinel rendering.
enum Piece<'a> {
    Markup(&'a str),
    /// The content of message `i`.
    Content(usize),
}

/// A prompt with the byte ranges that came from message content, in order, non-overlapping.
pub(super) struct Filled {
    pub prompt: String,
    pub content: Vec<Range<usize>>,
    /// The prompt equals the real rendering (false: the template changed content in a way that
    /// could not be followed, and the content went in verbatim).
    pub exact: bool,
}

impl Sentinels {
    /// A marker absent from `texts` (contents, roles, the template source, BOS/EOS text): the
    /// first private-use character none of them holds (6400 in the BMP, then plane 15's).
    pub fn new<'a>(texts: impl Iterator<Item = &'a str>) -> Sentinels {
        let mut used = std::collections::HashSet::new();
        for t in texts {
            used.extend(t.chars().filter(|&c| is_private(c)));
        }
        let mark = ('\u{E000}'..='\u{F8FF}')
            .chain('\u{F0000}'..='\u{FFFFD}')
            .find(|c| !used.contains(c))
            // 71,933 distinct private-use characters would all have to be in the input.
            .unwrap_or('\u{10FFFD}');
        Sentinels { mark }
    }

    /// The stand-in for message `i`'s content.
    pub fn of(&self, i: usize) -> String {
        format!("{m}{i}{m}", m = self.mark)
    }

    /// The messages with their content replaced by sentinels.
    pub fn stand_ins(&self, messages: &[ChatMessage]) -> Vec<ChatMessage> {
        messages
            .iter()
            .enumerate()
            .map(|(i, m)| ChatMessage::new(m.role.as_str(), self.of(i)))
            .collect()
    }

    /// Fills the sentinels of `marked` with the messages' content, following `real` (the
    /// rendering with the real content) where given. None when `marked` holds a marker that is
    /// not a whole sentinel (the template cut or rewrote one).
    pub fn fill(
        &self,
        marked: &str,
        messages: &[ChatMessage],
        real: Option<&str>,
    ) -> Option<Filled> {
        let pieces = self.pieces(marked, messages.len())?;
        let mut prompt = String::with_capacity(marked.len() + real.map_or(0, str::len));
        let mut content = Vec::new();
        // Where `prompt` stands in `real` while they agree; None once they differ.
        let mut follow = real.map(|r| (r, 0usize));
        for (k, piece) in pieces.iter().enumerate() {
            match *piece {
                Piece::Markup(m) => {
                    follow = follow
                        .and_then(|(r, pos)| r[pos..].starts_with(m).then_some((r, pos + m.len())));
                    prompt.push_str(m);
                }
                Piece::Content(i) => {
                    let c = messages[i].content.as_str();
                    let next = match pieces.get(k + 1) {
                        Some(Piece::Markup(m)) => *m,
                        _ => "",
                    };
                    let chosen = follow.and_then(|(r, pos)| {
                        [c, c.trim(), c.trim_start(), c.trim_end()]
                            .into_iter()
                            .find(|cand| {
                                r[pos..].starts_with(cand)
                                    && r[pos + cand.len()..].starts_with(next)
                            })
                    });
                    let text = match (chosen, follow) {
                        (Some(t), Some((r, pos))) => {
                            follow = Some((r, pos + t.len()));
                            t
                        }
                        _ => {
                            follow = None;
                            c
                        }
                    };
                    let start = prompt.len();
                    prompt.push_str(text);
                    if !text.is_empty() {
                        content.push(start..prompt.len());
                    }
                }
            }
        }
        let exact = match follow {
            Some((r, pos)) => pos == r.len(),
            None => real.is_none(),
        };
        Some(Filled {
            prompt,
            content,
            exact,
        })
    }

    /// `marked` split into markup and sentinels.
    fn pieces<'a>(&self, marked: &'a str, n: usize) -> Option<Vec<Piece<'a>>> {
        let mut out = Vec::new();
        let mut rest = marked;
        while let Some(open) = rest.find(self.mark) {
            if open > 0 {
                out.push(Piece::Markup(&rest[..open]));
            }
            let after = &rest[open + self.mark.len_utf8()..];
            let close = after.find(self.mark)?;
            let i: usize = after[..close].parse().ok()?;
            if i >= n || !after[..close].bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            out.push(Piece::Content(i));
            rest = &after[close + self.mark.len_utf8()..];
        }
        if !rest.is_empty() {
            out.push(Piece::Markup(rest));
        }
        Some(out)
    }
}

fn is_private(c: char) -> bool {
    matches!(c, '\u{E000}'..='\u{F8FF}' | '\u{F0000}'..='\u{10FFFD}')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msgs(contents: &[&str]) -> Vec<ChatMessage> {
        contents
            .iter()
            .map(|c| ChatMessage::new("user", *c))
            .collect()
    }

    #[test]
    fn the_marker_avoids_every_input() {
        let s = Sentinels::new(["a\u{E000}b", "\u{E001}"].into_iter());
        assert_eq!(s.mark, '\u{E002}');
    }

    #[test]
    fn contents_are_located_and_trims_followed() {
        let m = msgs(&["  hi <x> ", "yo"]);
        let s = Sentinels::new(m.iter().map(|m| m.content.as_str()));
        let marked = format!("[{}]({})", s.of(0), s.of(1));
        // the real rendering trimmed the first content
        let f = s.fill(&marked, &m, Some("[hi <x>](yo)")).unwrap();
        assert!(f.exact);
        assert_eq!(f.prompt, "[hi <x>](yo)");
        assert_eq!(f.content, vec![1..7, 9..11]);
        // a rewrite that cannot be followed: verbatim, not exact, ranges still right
        let f = s.fill(&marked, &m, Some("[HI](YO)")).unwrap();
        assert!(!f.exact);
        assert_eq!(f.prompt, "[  hi <x> ](yo)");
        assert_eq!(f.content, vec![1..10, 12..14]);
        // a cut sentinel is refused
        let cut = format!("[{}", &s.of(0)[..3]);
        assert!(s.fill(&cut, &m, None).is_none());
    }
}
