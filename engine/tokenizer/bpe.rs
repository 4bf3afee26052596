//! Byte-level BPE (GPT-2 style, `tokenizer.ggml.model = gpt2`): each word's bytes start as the
//! tokens of their printable stand-in chars, then the lowest-ranked adjacent merge is applied
//! until none applies. A binary heap of candidate pairs over a linked list of symbols keeps this
//! O(n log n) per word; stale heap entries are skipped when popped.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use super::error::TokenizerError;
use super::unicode::byte_to_char_table;

/// Marks a byte whose stand-in char is not in the vocabulary.
const NO_TOKEN: u32 = u32::MAX;

pub struct BpeModel {
    /// (left id, right id) -> (rank, merged id)
    merges: HashMap<(u32, u32), (u32, u32)>,
    /// Token of each byte's stand-in char.
    byte_token: [u32; 256],
    /// Merges skipped at load because a part or the result is not a token.
    pub skipped_merges: usize,
}

#[derive(PartialEq, Eq)]
struct Cand {
    rank: u32,
    left: u32,
    right: u32,
    left_id: u32,
    right_id: u32,
    merged: u32,
}

impl Ord for Cand {
    // BinaryHeap is a max-heap: the lowest rank, then the leftmost pair, must compare greatest.
    fn cmp(&self, o: &Self) -> Ordering {
        o.rank.cmp(&self.rank).then(o.left.cmp(&self.left))
    }
}
impl PartialOrd for Cand {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

struct Sym {
    id: u32,
    prev: u32,
    next: u32,
    alive: bool,
}

const NONE: u32 = u32::MAX;

impl BpeModel {
    pub fn new(
        merges: &[String],
        token_to_id: &HashMap<Vec<u8>, u32>,
    ) -> Result<BpeModel, TokenizerError> {
        let table = byte_to_char_table();
        let mut byte_token = [NO_TOKEN; 256];
        for (b, c) in table.iter().enumerate() {
            let mut buf = [0u8; 4];
            if let Some(&id) = token_to_id.get(c.encode_utf8(&mut buf).as_bytes()) {
                byte_token[b] = id;
            }
        }
        let mut map = HashMap::with_capacity(merges.len());
        let mut skipped = 0;
        for (rank, m) in merges.iter().enumerate() {
            // Split at the first space after the first char (llama.cpp: find(' ', 1)).
            let split = m
                .char_indices()
                .skip(1)
                .find(|&(_, c)| c == ' ')
                .map(|(i, _)| i);
            let Some(at) = split else {
                return Err(TokenizerError::BadValue {
                    key: "tokenizer.ggml.merges".into(),
                    msg: format!("merge #{rank} {m:?} has no space separator"),
                });
            };
            let (l, r) = (&m[..at], &m[at + 1..]);
            let merged = format!("{l}{r}");
            match (
                token_to_id.get(l.as_bytes()),
                token_to_id.get(r.as_bytes()),
                token_to_id.get(merged.as_bytes()),
            ) {
                (Some(&a), Some(&b), Some(&c)) => {
                    map.entry((a, b)).or_insert((rank as u32, c));
                }
                _ => skipped += 1,
            }
        }
        Ok(BpeModel {
            merges: map,
            byte_token,
            skipped_merges: skipped,
        })
    }

    /// Appends the tokens of one pre-tokenized word. Bytes without a token are replaced by `unk`
    /// (dropped when there is none, as llama.cpp does).
    pub fn encode_word(&self, word: &[u8], unk: Option<u32>, out: &mut Vec<u32>) {
        let push = |id: u32, out: &mut Vec<u32>| {
            if id != NO_TOKEN {
                out.push(id)
            } else if let Some(u) = unk {
                out.push(u)
            }
        };
        if word.len() == 1 {
            push(self.byte_token[word[0] as usize], out);
            return;
        }
        let n = word.len() as u32;
        let mut syms: Vec<Sym> = word
            .iter()
            .enumerate()
            .map(|(i, &b)| Sym {
                id: self.byte_token[b as usize],
                prev: if i == 0 { NONE } else { i as u32 - 1 },
                next: if i as u32 + 1 == n {
                    NONE
                } else {
                    i as u32 + 1
                },
                alive: true,
            })
            .collect();
        let mut heap = BinaryHeap::with_capacity(word.len());
        let cand = |syms: &[Sym], l: u32, r: u32| -> Option<Cand> {
            if l == NONE || r == NONE {
                return None;
            }
            let (a, b) = (syms[l as usize].id, syms[r as usize].id);
            let &(rank, merged) = self.merges.get(&(a, b))?;
            Some(Cand {
                rank,
                left: l,
                right: r,
                left_id: a,
                right_id: b,
                merged,
            })
        };
        for i in 1..n {
            if let Some(c) = cand(&syms, i - 1, i) {
                heap.push(c);
            }
        }
        while let Some(c) = heap.pop() {
            let (l, r) = (c.left as usize, c.right as usize);
            // Stale: one side was merged away or changed since this pair was queued.
            if !syms[l].alive
                || !syms[r].alive
                || syms[l].id != c.left_id
                || syms[r].id != c.right_id
            {
                continue;
            }
            syms[l].id = c.merged;
            syms[r].alive = false;
            let next = syms[r].next;
            syms[l].next = next;
            if next != NONE {
                syms[next as usize].prev = c.left;
            }
            if let Some(x) = cand(&syms, syms[l].prev, c.left) {
                heap.push(x);
            }
            if let Some(x) = cand(&syms, c.left, next) {
                heap.push(x);
            }
        }
        let mut i = 0u32;
        while i != NONE {
            push(syms[i as usize].id, out);
            i = syms[i as usize].next;
        }
    }
}
