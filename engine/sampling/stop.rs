//! Stop strings over streamed text: text that could still be the start of a stop string is held
//! back until it is known not to be one, so a stop string never reaches the user half-printed.

/// What one `push` lets through.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct StopOutput {
    /// Text safe to show now.
    pub emit: String,
    /// A stop string was found; `emit` ends right before it and generation should end.
    pub stopped: bool,
}

#[derive(Clone, Debug, Default)]
pub struct StopMatcher {
    stops: Vec<String>,
    held: String,
    stopped: bool,
}

impl StopMatcher {
    /// Empty stop strings are ignored (they would match everywhere).
    pub fn new<S: AsRef<str>>(stops: &[S]) -> Self {
        let stops = stops
            .iter()
            .map(|s| s.as_ref().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        Self {
            stops,
            held: String::new(),
            stopped: false,
        }
    }

    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// Feeds the next piece of decoded text.
    pub fn push(&mut self, piece: &str) -> StopOutput {
        if self.stopped {
            return StopOutput {
                emit: String::new(),
                stopped: true,
            };
        }
        self.held.push_str(piece);
        // The earliest complete match wins (what a reader would see first).
        let first = self
            .stops
            .iter()
            .filter_map(|s| self.held.find(s.as_str()))
            .min();
        if let Some(at) = first {
            let emit = self.held[..at].to_string();
            self.held.clear();
            self.stopped = true;
            return StopOutput {
                emit,
                stopped: true,
            };
        }
        let keep = self.held_back_len();
        let cut = self.held.len() - keep;
        let emit = self.held[..cut].to_string();
        self.held.drain(..cut);
        StopOutput {
            emit,
            stopped: false,
        }
    }

    /// End of generation without a stop string: whatever was held back is real text.
    pub fn finish(&mut self) -> String {
        if self.stopped {
            return String::new();
        }
        std::mem::take(&mut self.held)
    }

    /// Bytes at the end of `held` that are a proper prefix of some stop string (the longest such
    /// suffix), always on a char boundary.
    fn held_back_len(&self) -> usize {
        let mut best = 0;
        for (start, _) in self.held.char_indices() {
            let tail = &self.held[start..];
            if self
                .stops
                .iter()
                .any(|s| s.len() > tail.len() && s.starts_with(tail))
            {
                best = tail.len();
                break; // the first start is the longest suffix
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(stops: &[&str], pieces: &[&str]) -> (Vec<String>, bool, String) {
        let mut m = StopMatcher::new(stops);
        let mut out = Vec::new();
        let mut stopped = false;
        for p in pieces {
            let o = m.push(p);
            out.push(o.emit);
            if o.stopped {
                stopped = true;
                break;
            }
        }
        let tail = m.finish();
        (out, stopped, tail)
    }

    #[test]
    fn holds_back_a_possible_prefix_then_releases_it() {
        let (out, stopped, tail) = run(&["<end>"], &["Hello <", "en", "d-ish", " ok"]);
        assert_eq!(out, vec!["Hello ", "", "<end-ish", " ok"]);
        assert!(!stopped);
        assert_eq!(tail, "");
    }

    #[test]
    fn stop_split_across_pieces_is_cut_exactly() {
        let (out, stopped, tail) = run(&["\nUser:"], &["Sure.", "\nUs", "er: more"]);
        assert_eq!(out, vec!["Sure.", "", ""]);
        assert!(stopped);
        assert_eq!(tail, "");
    }

    #[test]
    fn earliest_of_several_stops_wins_and_finish_flushes() {
        let (out, stopped, _) = run(&["bc", "abcd"], &["xabcd"]);
        assert_eq!(out, vec!["x"]); // "abcd" starts first
        let (out, _, _) = run(&["cd", "bcx"], &["abcd"]);
        assert_eq!(out, vec!["ab"]);
        assert!(stopped);
        let (out, stopped, tail) = run(&["STOP"], &["ab", "cST"]);
        assert_eq!(out, vec!["ab", "c"]);
        assert!(!stopped);
        assert_eq!(tail, "ST");
    }

    #[test]
    fn multibyte_text_is_never_split_inside_a_char() {
        let (out, stopped, _) = run(&["é!"], &["café", "?", "é!"]);
        assert_eq!(out, vec!["caf", "é?", ""]);
        assert!(stopped);
    }
}
