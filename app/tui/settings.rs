//! The settings overlay's form (Ctrl+S): the system prompt and the sampling of the next replies,
//! edited as text, checked field by field, applied as a whole or not at all. The app keeps the
//! result as this conversation's settings (saved with it); absent, the preset's apply.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use strata::protocol::Sampling;

use crate::history::ChatSettings;

/// The fields in display order; `SYSTEM` is the last (its text wraps below the others).
pub const FIELDS: [&str; 8] = [
    "temperature",
    "top_k",
    "top_p",
    "min_p",
    "repeat_penalty",
    "max_tokens",
    "seed",
    "system prompt",
];
pub const SYSTEM: usize = 7;
/// The highest temperature accepted (the engine's check refuses more too).
pub const MAX_TEMPERATURE: f32 = 100.0;

#[derive(Debug, Clone, PartialEq)]
pub struct SettingsForm {
    /// The text of each field, as [`FIELDS`].
    pub text: [String; 8],
    pub cursor: usize,
    /// Why the last Enter did not apply (names the field).
    pub error: Option<String>,
}

/// What a key did to the form.
#[derive(Debug, Clone, PartialEq)]
pub enum FormKey {
    Editing,
    Cancel,
    Apply(ChatSettings),
    /// Ctrl+R: refill from the preset (the app knows its values).
    Reset,
}

impl SettingsForm {
    pub fn new(s: &ChatSettings) -> SettingsForm {
        let p = &s.sampling;
        SettingsForm {
            text: [
                p.temperature.to_string(),
                p.top_k.to_string(),
                p.top_p.to_string(),
                p.min_p.to_string(),
                p.repeat_penalty.to_string(),
                p.max_tokens.to_string(),
                p.seed.map_or(String::new(), |s| s.to_string()),
                s.system_prompt.clone(),
            ],
            cursor: 0,
            error: None,
        }
    }

    pub fn key(&mut self, k: KeyEvent) -> FormKey {
        let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
        let field = &mut self.text[self.cursor];
        match k.code {
            KeyCode::Esc => return FormKey::Cancel,
            KeyCode::Enter
                if self.cursor == SYSTEM
                    && (ctrl
                        || k.modifiers.contains(KeyModifiers::ALT)
                        || k.modifiers.contains(KeyModifiers::SHIFT)) =>
            {
                field.push('\n')
            }
            KeyCode::Char('j') if ctrl && self.cursor == SYSTEM => field.push('\n'),
            KeyCode::Enter => match self.parse() {
                Ok(s) => return FormKey::Apply(s),
                Err((i, why)) => {
                    self.cursor = i;
                    self.error = Some(why);
                }
            },
            KeyCode::Char('r') if ctrl => return FormKey::Reset,
            KeyCode::Char('u') if ctrl => field.clear(),
            KeyCode::Up | KeyCode::BackTab => self.cursor = self.cursor.saturating_sub(1),
            KeyCode::Down | KeyCode::Tab => self.cursor = (self.cursor + 1).min(FIELDS.len() - 1),
            KeyCode::Backspace => {
                field.pop();
            }
            KeyCode::Char(c) if !ctrl => field.push(c),
            _ => {}
        }
        FormKey::Editing
    }

    /// Pasted text goes into the field under the cursor (numbers: the first line only).
    pub fn paste(&mut self, text: &str) {
        if self.cursor == SYSTEM {
            self.text[SYSTEM].push_str(text);
        } else {
            self.text[self.cursor].push_str(text.lines().next().unwrap_or("").trim());
        }
    }

    /// Every field checked; the first bad one as (index, "field: why").
    pub fn parse(&self) -> Result<ChatSettings, (usize, String)> {
        let t = |i: usize| self.text[i].trim();
        let bad = |i: usize, why: String| (i, format!("{}: {why}", FIELDS[i]));
        let float = |i: usize| -> Result<f32, (usize, String)> {
            t(i).parse::<f32>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| bad(i, format!("{:?} is not a number", t(i))))
        };
        let int = |i: usize| -> Result<u64, (usize, String)> {
            t(i).parse::<u64>()
                .map_err(|_| bad(i, format!("{:?} is not a whole number ≥ 0", t(i))))
        };
        let u32_of = |i: usize| -> Result<u32, (usize, String)> {
            let v = int(i)?;
            u32::try_from(v).map_err(|_| bad(i, format!("{v} is more than {}", u32::MAX)))
        };
        let temperature = float(0)?;
        if !(0.0..=MAX_TEMPERATURE).contains(&temperature) {
            return Err(bad(
                0,
                format!("{} is not in [0, {MAX_TEMPERATURE}] (0 = greedy)", t(0)),
            ));
        }
        let top_k = u32_of(1)?;
        let top_p = float(2)?;
        // as the engine's sampler checks it: 0 would keep no token
        if !(top_p > 0.0 && top_p <= 1.0) {
            return Err(bad(2, format!("{} is not in (0, 1] (1 = off)", t(2))));
        }
        let min_p = float(3)?;
        if !(0.0..=1.0).contains(&min_p) {
            return Err(bad(3, format!("{} is not in [0, 1] (0 = off)", t(3))));
        }
        let repeat_penalty = float(4)?;
        if repeat_penalty <= 0.0 {
            return Err(bad(4, format!("{} is not > 0 (1 = off)", t(4))));
        }
        let max_tokens = u32_of(5)?;
        if max_tokens == 0 {
            return Err(bad(5, "0 would generate nothing (at least 1)".into()));
        }
        let seed = if t(6).is_empty() { None } else { Some(int(6)?) };
        let sampling = Sampling {
            temperature,
            top_k,
            top_p,
            min_p,
            repeat_penalty,
            seed,
            max_tokens,
        };
        // the engine's own check last, so nothing it would refuse is applied here
        strata::server::decode::sampling_params(&sampling)
            .validate()
            .map_err(|e| (0, e.to_string()))?;
        Ok(ChatSettings {
            system_prompt: self.text[SYSTEM].clone(),
            sampling,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form() -> SettingsForm {
        SettingsForm::new(&ChatSettings {
            system_prompt: "Be brief.".into(),
            sampling: Sampling::default(),
        })
    }

    #[test]
    fn round_trips_the_values_it_was_given() {
        let f = form();
        assert_eq!(f.text[0], "0.7");
        assert_eq!(f.text[6], "", "no seed = from the clock");
        let s = f.parse().unwrap();
        assert_eq!(s.sampling, Sampling::default());
        assert_eq!(s.system_prompt, "Be brief.");
    }

    #[test]
    fn each_range_is_checked_and_named() {
        for (i, text, needle) in [
            (0, "-1", "temperature: -1 is not in [0, 100]"),
            (0, "1e30", "temperature: 1e30 is not in [0, 100]"),
            (0, "hot", "temperature: \"hot\" is not a number"),
            (0, "NaN", "temperature: \"NaN\" is not a number"),
            (1, "-3", "top_k: \"-3\" is not a whole number"),
            (2, "0", "top_p: 0 is not in (0, 1]"),
            (2, "1.5", "top_p: 1.5 is not in (0, 1]"),
            (3, "2", "min_p: 2 is not in [0, 1]"),
            (4, "0", "repeat_penalty: 0 is not > 0"),
            (5, "0", "max_tokens: 0 would generate nothing"),
            (5, "99999999999", "max_tokens: 99999999999 is more than"),
            (6, "abc", "seed: \"abc\" is not a whole number"),
        ] {
            let mut f = form();
            f.text[i] = text.into();
            let (at, why) = f.parse().unwrap_err();
            assert_eq!(at, i, "{why}");
            assert!(why.starts_with(needle), "{text}: {why}");
        }
        let mut f = form();
        f.text[6] = "42".into();
        f.text[0] = "0".into();
        assert_eq!(f.parse().unwrap().sampling.seed, Some(42));
    }

    #[test]
    fn a_bad_enter_moves_to_the_field_and_keeps_the_form() {
        let mut f = form();
        f.cursor = 0;
        for _ in 0..3 {
            f.key(KeyEvent::new(KeyCode::Down, KeyModifiers::NONE));
        }
        f.key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL));
        f.key(KeyEvent::new(KeyCode::Char('3'), KeyModifiers::NONE));
        f.cursor = 0;
        assert_eq!(
            f.key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)),
            FormKey::Editing
        );
        assert_eq!(f.cursor, 3);
        assert!(f.error.as_deref().unwrap().starts_with("min_p: 3"));
    }
}
