//! Prompt-lookup drafting: find the last `n` tokens earlier in the sequence (prompt and output)
//! and propose what followed them there. Longer suffixes are tried first (n = n_max down to
//! n_min); among the matches of one n the most recent one whose continuation is `max` tokens long
//! wins, else the one with the longest continuation. Works with any model; costs a scan of the
//! sequence per window (microseconds at chat lengths).

use super::drafter::{Draft, DraftInput, Drafter};
use super::SpecError;

#[derive(Clone, Debug)]
pub struct NgramDrafter {
    n_max: usize,
    n_min: usize,
    /// Only the last `horizon` tokens are searched (bounds the cost on long contexts).
    horizon: usize,
}

impl Default for NgramDrafter {
    fn default() -> Self {
        NgramDrafter {
            n_max: 3,
            n_min: 1,
            horizon: 8192,
        }
    }
}

impl NgramDrafter {
    /// Suffix lengths tried, longest first: `n_max` down to `n_min` (1 <= n_min <= n_max).
    pub fn new(n_max: usize, n_min: usize) -> Result<NgramDrafter, SpecError> {
        if n_min == 0 || n_min > n_max {
            return Err(SpecError::BadParam {
                name: "ngram n_min",
                value: n_min as f64,
                why: "must be in 1..=n_max",
            });
        }
        Ok(NgramDrafter {
            n_max,
            n_min,
            ..NgramDrafter::default()
        })
    }

    /// The continuation after the best earlier match of the last `n` tokens, at most `max` long.
    fn lookup<'t>(&self, tokens: &'t [u32], n: usize, max: usize) -> Option<&'t [u32]> {
        let len = tokens.len();
        if len <= n || max == 0 {
            return None;
        }
        let suffix = &tokens[len - n..];
        let lo = len.saturating_sub(self.horizon);
        let mut best: Option<&'t [u32]> = None;
        // i is the start of an earlier occurrence; it must end before the suffix starts over.
        for i in (lo..len - n).rev() {
            if &tokens[i..i + n] != suffix {
                continue;
            }
            let start = i + n;
            let cont = &tokens[start..(start + max).min(len)];
            if best.is_none_or(|b| cont.len() > b.len()) {
                best = Some(cont);
            }
            if cont.len() == max {
                break;
            }
        }
        best
    }
}

impl Drafter for NgramDrafter {
    fn name(&self) -> &'static str {
        "ngram"
    }

    fn propose(&mut self, input: &DraftInput<'_>, max: usize) -> Result<Draft, SpecError> {
        for n in (self.n_min..=self.n_max).rev() {
            if let Some(c) = self.lookup(input.tokens, n, max) {
                return Ok(Draft::deterministic(c.to_vec()));
            }
        }
        Ok(Draft::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn propose(d: &mut NgramDrafter, tokens: &[u32], max: usize) -> Vec<u32> {
        d.propose(
            &DraftInput {
                tokens,
                hidden: None,
            },
            max,
        )
        .unwrap()
        .tokens
    }

    #[test]
    fn longest_suffix_wins_over_a_more_recent_shorter_one() {
        let mut d = NgramDrafter::default();
        // "5 6 7" occurred at the start followed by 8 9; "7" alone recurs later followed by 1.
        let seq = [5, 6, 7, 8, 9, 7, 1, 2, 5, 6, 7];
        assert_eq!(propose(&mut d, &seq, 2), vec![8, 9]);
        // With n_max = 1 only the last "7" counts: the most recent full-length match is at 5.
        let mut d1 = NgramDrafter::new(1, 1).unwrap();
        assert_eq!(propose(&mut d1, &seq, 2), vec![1, 2]);
    }

    #[test]
    fn prefers_a_full_length_continuation_and_caps_at_max() {
        let mut d = NgramDrafter::new(2, 1).unwrap();
        // The most recent match of "1 2" (at 4) has 2 tokens after it before the end; the
        // earlier one (at 0) has the 3 asked for.
        let seq = [1, 2, 3, 4, 1, 2, 1, 2];
        assert_eq!(propose(&mut d, &seq, 3), vec![3, 4, 1]);
        assert_eq!(propose(&mut d, &seq, 1), vec![1]); // the most recent is full length at max 1
        assert_eq!(propose(&mut d, &seq, 0), Vec::<u32>::new());
    }

    #[test]
    fn no_match_gives_an_empty_draft() {
        let mut d = NgramDrafter::default();
        assert!(propose(&mut d, &[1, 2, 3, 4], 4).is_empty());
        assert!(propose(&mut d, &[7], 4).is_empty());
        assert!(propose(&mut d, &[], 4).is_empty());
        assert!(NgramDrafter::new(2, 3).is_err());
        assert!(NgramDrafter::new(2, 0).is_err());
    }

    #[test]
    fn a_repeating_run_extends_itself() {
        let mut d = NgramDrafter::default();
        // Periodic sequence: the draft continues the period from the latest complete match.
        let seq = [1, 2, 3, 1, 2, 3, 1, 2];
        assert_eq!(propose(&mut d, &seq, 4), vec![3, 1, 2]);
    }
}
