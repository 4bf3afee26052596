//! The saved conversations as the conversations overlay (Ctrl+O) lists them: id, date, message
//! count and the first user line, newest first, read through `HistoryStore::list` / `load` (so
//! a file that does not parse is moved aside as on `--resume`, and shows as an error row).

use strata::protocol::Role;

use crate::history::{stamp, Conversation, HistoryStore};

/// At most this many (the newest) are read for the list.
pub const LIST_CAP: usize = 200;

#[derive(Debug, Clone, PartialEq)]
pub struct ConvSummary {
    pub id: String,
    /// Unix seconds (the conversation's `created`).
    pub created: u64,
    pub messages: usize,
    /// The first line of the first user message ("" if none).
    pub first_line: String,
    /// Why it could not be read (then the other fields are empty).
    pub error: Option<String>,
}

impl ConvSummary {
    pub fn of(c: &Conversation) -> ConvSummary {
        let first_line = c
            .messages
            .iter()
            .find(|m| m.role == Role::User)
            .and_then(|m| m.content.lines().find(|l| !l.trim().is_empty()))
            .unwrap_or("")
            .trim()
            .to_string();
        ConvSummary {
            id: c.id.clone(),
            created: c.created,
            messages: c.messages.len(),
            first_line,
            error: None,
        }
    }
}

/// What the overlay shows: the newest `LIST_CAP` rows and how many there are in all.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConvList {
    pub rows: Vec<ConvSummary>,
    pub total: usize,
}

pub fn list(history: &HistoryStore) -> Result<ConvList, String> {
    let ids = history.list().map_err(|e| format!("{e:#}"))?;
    let total = ids.len();
    let rows = ids
        .into_iter()
        .take(LIST_CAP)
        .map(|id| match history.load(&id) {
            Ok(c) => ConvSummary::of(&c),
            Err(e) => ConvSummary {
                id,
                created: 0,
                messages: 0,
                first_line: String::new(),
                error: Some(format!("{e:#}")),
            },
        })
        .collect();
    Ok(ConvList { rows, total })
}

/// `2025-11-29 23:17` (UTC) from Unix seconds.
pub fn date(unix: u64) -> String {
    let s = stamp(unix);
    format!(
        "{}-{}-{} {}:{}",
        &s[0..4],
        &s[4..6],
        &s[6..8],
        &s[9..11],
        &s[11..13]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_is_utc() {
        assert_eq!(date(1_764_458_255), "2025-11-29 23:17");
    }
}
