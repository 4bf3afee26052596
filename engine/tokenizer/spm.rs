//! SentencePiece-style BPE (`tokenizer.ggml.model = llama`), as llama.cpp runs it: start from
//! UTF-8 chars, repeatedly merge the adjacent pair whose concatenation is a token with the highest
//! score (leftmost on ties); chars that never become tokens fall back to `<0xXX>` byte tokens.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

#[derive(PartialEq)]
struct Cand {
    score: f32,
    left: u32,
    right: u32,
    /// Byte length of the merged text: a mismatch when popped means the pair is stale.
    size: u32,
}
impl Eq for Cand {}
impl Ord for Cand {
    fn cmp(&self, o: &Self) -> Ordering {
        self.score.total_cmp(&o.score).then(o.left.cmp(&self.left))
    }
}
impl PartialOrd for Cand {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

struct Sym {
    start: u32,
    n: u32,
    prev: u32,
    next: u32,
}
const NONE: u32 = u32::MAX;

pub struct SpmModel<'a> {
    pub token_to_id: &'a HashMap<Vec<u8>, u32>,
    pub scores: &'a [f32],
    /// Token for each byte value (`<0xXX>`, else the one-byte string), for the byte fallback.
    pub byte_token: &'a [Option<u32>; 256],
    pub unk: Option<u32>,
}

impl SpmModel<'_> {
    /// Tokenizes `text` (already space-escaped to U+2581) and appends to `out`.
    pub fn encode(&self, text: &str, out: &mut Vec<u32>) {
        let bytes = text.as_bytes();
        let mut syms: Vec<Sym> = Vec::with_capacity(text.len());
        for (at, c) in text.char_indices() {
            let i = syms.len() as u32;
            syms.push(Sym {
                start: at as u32,
                n: c.len_utf8() as u32,
                prev: if i == 0 { NONE } else { i - 1 },
                next: i + 1,
            });
        }
        let Some(last) = syms.last_mut() else { return };
        last.next = NONE;
        let mut heap = BinaryHeap::with_capacity(syms.len());
        let cand = |syms: &[Sym], l: u32, r: u32| -> Option<Cand> {
            if l == NONE || r == NONE {
                return None;
            }
            let (a, b) = (&syms[l as usize], &syms[r as usize]);
            let size = a.n + b.n;
            let piece = &bytes[a.start as usize..(a.start + size) as usize];
            let &id = self.token_to_id.get(piece)?;
            Some(Cand {
                score: self.scores[id as usize],
                left: l,
                right: r,
                size,
            })
        };
        for i in 1..syms.len() as u32 {
            if let Some(c) = cand(&syms, i - 1, i) {
                heap.push(c);
            }
        }
        while let Some(c) = heap.pop() {
            let (l, r) = (c.left as usize, c.right as usize);
            if syms[l].n == 0 || syms[r].n == 0 || syms[l].n + syms[r].n != c.size {
                continue;
            }
            syms[l].n += syms[r].n;
            syms[r].n = 0;
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
            let s = &syms[i as usize];
            let piece = &bytes[s.start as usize..(s.start + s.n) as usize];
            match self.token_to_id.get(piece) {
                Some(&id) => out.push(id),
                None => {
                    for &b in piece {
                        if let Some(id) = self.byte_token[b as usize].or(self.unk) {
                            out.push(id);
                        }
                    }
                }
            }
            i = s.next;
        }
    }
}
