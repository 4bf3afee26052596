//! Splitting text around special tokens before BPE, with llama.cpp's precedence: longer special
//! tokens are matched first (over the whole text), then shorter ones only in what is left.
//! Instead of one substring search per special token (Gemma has 6k+), a byte trie lists every
//! occurrence of every special token in one pass; occurrences are then accepted in precedence
//! order unless they overlap an accepted one, which yields the same split.

use std::ops::Range;

use super::spec::TokenType;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fragment {
    Text(Range<usize>),
    Token(u32),
}

#[derive(Default)]
struct Node {
    /// Sorted by byte for binary search.
    children: Vec<(u8, u32)>,
    /// (token id, precedence rank, needs parse_special)
    terminal: Option<(u32, u32, bool)>,
}

pub struct SpecialMatcher {
    nodes: Vec<Node>,
    pub count: usize,
}

impl SpecialMatcher {
    /// Control and unknown tokens match only with `parse_special`; user-defined tokens always do
    /// (llama.cpp pre-splits them like Hugging Face "added tokens").
    pub fn new(tokens: &[Vec<u8>], types: &[TokenType]) -> SpecialMatcher {
        let mut ids: Vec<u32> = (0..tokens.len() as u32)
            .filter(|&i| {
                matches!(
                    types[i as usize],
                    TokenType::Control | TokenType::UserDefined | TokenType::Unknown
                ) && !tokens[i as usize].is_empty()
            })
            .collect();
        ids.sort_by(|&a, &b| {
            tokens[b as usize]
                .len()
                .cmp(&tokens[a as usize].len())
                .then(a.cmp(&b))
        });
        let mut nodes = vec![Node::default()];
        for (rank, &id) in ids.iter().enumerate() {
            let mut cur = 0usize;
            for &byte in &tokens[id as usize] {
                let next = match nodes[cur].children.binary_search_by_key(&byte, |&(b, _)| b) {
                    Ok(k) => nodes[cur].children[k].1 as usize,
                    Err(k) => {
                        let new = nodes.len();
                        nodes.push(Node::default());
                        nodes[cur].children.insert(k, (byte, new as u32));
                        new
                    }
                };
                cur = next;
            }
            if nodes[cur].terminal.is_none() {
                let gated = types[id as usize] != TokenType::UserDefined;
                nodes[cur].terminal = Some((id, rank as u32, gated));
            }
        }
        SpecialMatcher {
            nodes,
            count: ids.len(),
        }
    }

    /// Splits `text` into raw-text fragments and special tokens, in order. `blocked`: byte ranges
    /// (sorted, non-overlapping) where control tokens are not recognised even with
    /// `parse_special`: a control token touching one is text (the content of a chat message).
    pub fn split(
        &self,
        text: &str,
        parse_special: bool,
        blocked: &[Range<usize>],
    ) -> Vec<Fragment> {
        let bytes = text.as_bytes();
        // (rank, start, len, id) of every occurrence.
        let mut found: Vec<(u32, usize, usize, u32)> = Vec::new();
        for start in 0..bytes.len() {
            let mut cur = 0usize;
            for (k, &byte) in bytes[start..].iter().enumerate() {
                let node = &self.nodes[cur];
                match node.children.binary_search_by_key(&byte, |&(b, _)| b) {
                    Ok(j) => cur = node.children[j].1 as usize,
                    Err(_) => break,
                }
                if let Some((id, rank, gated)) = self.nodes[cur].terminal {
                    if !gated || (parse_special && !overlaps(blocked, start, k + 1)) {
                        found.push((rank, start, k + 1, id));
                    }
                }
            }
        }
        if found.is_empty() {
            return if text.is_empty() {
                vec![]
            } else {
                vec![Fragment::Text(0..text.len())]
            };
        }
        found.sort_unstable();
        let mut taken = vec![false; bytes.len()];
        let mut accepted: Vec<(usize, usize, u32)> = Vec::new();
        for (_, start, len, id) in found {
            // A token whose text is not valid UTF-8 could match inside a char: never split there.
            if !text.is_char_boundary(start) || !text.is_char_boundary(start + len) {
                continue;
            }
            if taken[start..start + len].iter().any(|&t| t) {
                continue;
            }
            taken[start..start + len].iter_mut().for_each(|t| *t = true);
            accepted.push((start, len, id));
        }
        accepted.sort_unstable();
        let mut out = Vec::with_capacity(accepted.len() * 2 + 1);
        let mut pos = 0;
        for (start, len, id) in accepted {
            if start > pos {
                out.push(Fragment::Text(pos..start));
            }
            out.push(Fragment::Token(id));
            pos = start + len;
        }
        if pos < bytes.len() {
            out.push(Fragment::Text(pos..bytes.len()));
        }
        out
    }
}

/// Whether `start..start + len` overlaps any of the sorted, disjoint `ranges`.
fn overlaps(ranges: &[Range<usize>], start: usize, len: usize) -> bool {
    let i = ranges.partition_point(|r| r.end <= start);
    ranges.get(i).is_some_and(|r| r.start < start + len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longer_token_wins_even_when_later() {
        let toks: Vec<Vec<u8>> = ["ab", "bcd", "x"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect();
        let ty = [
            TokenType::UserDefined,
            TokenType::Control,
            TokenType::Normal,
        ];
        let m = SpecialMatcher::new(&toks, &ty);
        assert_eq!(
            m.split("abcd", true, &[]),
            vec![Fragment::Text(0..1), Fragment::Token(1)]
        );
        // Without parse_special the control token is plain text, the user-defined one still splits.
        assert_eq!(
            m.split("abcd", false, &[]),
            vec![Fragment::Token(0), Fragment::Text(2..4)]
        );
        assert_eq!(m.split("", true, &[]), vec![]);
    }

    #[test]
    // one blocked byte range, not a list of numbers
    #[allow(clippy::single_range_in_vec_init)]
    fn blocked_ranges_keep_control_tokens_as_text() {
        let toks: Vec<Vec<u8>> = ["<e>", "ab"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect();
        let m = SpecialMatcher::new(&toks, &[TokenType::Control, TokenType::UserDefined]);
        // "<e>x<e>ab": the second <e> and the user-defined "ab" lie in the blocked range
        assert_eq!(
            m.split("<e>x<e>ab", true, &[3..9]),
            vec![Fragment::Token(0), Fragment::Text(3..7), Fragment::Token(1)]
        );
        // a control token only partly inside a blocked range is text too
        assert_eq!(m.split("<e>", true, &[2..3]), vec![Fragment::Text(0..3)]);
        assert_eq!(m.split("<e>", true, &[3..4]), vec![Fragment::Token(0)]);
    }
}
