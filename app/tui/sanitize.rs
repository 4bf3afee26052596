//! The one gate between text from outside the app and the terminal. Chat messages (the model's
//! output, a resumed conversation file), the input box (a paste), notices, engine errors, preset
//! files, GGUF metadata: any of it may hold control characters, and a control character in a
//! ratatui cell goes to the terminal as is — `ESC ] 0 ; … BEL` retitles it, `ESC ] 52 ; …` sets
//! the clipboard, `ESC [ 2 J` clears the screen, a CR or a tab moves the cursor under ratatui's
//! feet. ratatui draws a zero-width grapheme by appending it to the previous cell, so nothing in
//! the layout stops it.
//!
//! So every control character is replaced by a visible one-column marker at the point where text
//! becomes a [`Span`] (the panes and the markdown layout call [`text`], [`char`], [`line`] or
//! [`lines`]), and [`scrub`] drops any that is still in the frame's buffer before it is flushed
//! (a pane that forgot).
//!
//! The markers:
//! - C0 (U+0000–U+001F): the Unicode control pictures U+2400 + n (`␛` for ESC, `␇` for BEL, `␍`
//!   for CR, `␀` for NUL): made for exactly this, one column wide, and they name the character.
//! - DEL (U+007F): `␡` (U+2421, its control picture).
//! - C1 (U+0080–U+009F): `�` (U+FFFD). There are no pictures for C1; a `\u{9b}`-style escape
//!   would be six columns for one character and shift the layout of text that is usually just
//!   Latin-1 or cp1252 decoded wrongly, where the replacement character is what every other tool
//!   shows. (U+009B is a CSI in some terminals, so it must not pass either way.)
//! - `\n` stays (a line break for the layout; ratatui drops a lone one in a span).
//! - `\t` becomes [`TAB`] (four spaces, as in code blocks): a tab's column depends on where it
//!   lands, which a span does not know; prose wraps at tabs as at spaces, as before.
//!
//! Only the display changes: the conversation file and the export keep the text as it came.

use std::borrow::Cow;

use ratatui::buffer::Buffer;
use ratatui::text::{Line, Span};

/// What a tab is drawn as.
pub const TAB: &str = "    ";

/// The visible stand-in for a control character; `None` for anything else, `\n` and `\t`.
pub fn marker(c: char) -> Option<char> {
    match c {
        '\n' | '\t' => None,
        // U+2400..=U+241F are assigned (the C0 control pictures), so from_u32 cannot fail.
        '\u{0}'..='\u{1f}' => char::from_u32(0x2400 + c as u32),
        '\u{7f}' => Some('\u{2421}'),
        '\u{80}'..='\u{9f}' => Some('\u{fffd}'),
        _ => None,
    }
}

/// `c`, or its marker if it is a control character (`\n` and `\t` pass: the caller lays them
/// out).
pub fn visible(c: char) -> char {
    marker(c).unwrap_or(c)
}

/// The text with every control character but `\n` shown as its marker and tabs as [`TAB`].
/// Borrows when there is nothing to change (the common case).
pub fn text(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| c.is_control() && c != '\n') {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\t' => out.push_str(TAB),
            c => out.push(visible(c)),
        }
    }
    Cow::Owned(out)
}

/// A span whose content went through [`text`] (same style).
pub fn span(s: Span<'_>) -> Span<'_> {
    match text(&s.content) {
        Cow::Borrowed(_) => s,
        Cow::Owned(t) => Span::styled(t, s.style),
    }
}

/// Every span of the line through [`text`] (line style and alignment kept).
pub fn line(mut l: Line<'_>) -> Line<'_> {
    l.spans = l.spans.into_iter().map(span).collect();
    l
}

pub fn lines(ls: Vec<Line<'_>>) -> Vec<Line<'_>> {
    ls.into_iter().map(line).collect()
}

/// The last line of defence, run on the whole frame before it goes out: drops control
/// characters from every cell (they are zero-width, so the layout does not move; a cell left
/// empty becomes a space). Returns how many cells it had to change: 0 when every pane sanitised
/// its text, which the tests check.
pub fn scrub(buf: &mut Buffer) -> usize {
    let mut fixed = 0;
    for cell in buf.content.iter_mut() {
        let sym = cell.symbol();
        if sym.contains(|c: char| c.is_control()) {
            let clean: String = sym.chars().filter(|c| !c.is_control()).collect();
            cell.set_symbol(if clean.is_empty() { " " } else { &clean });
            fixed += 1;
        }
    }
    fixed
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::layout::Rect;
    use ratatui::style::Style;
    use ratatui::widgets::{Paragraph, Widget};
    use unicode_width::UnicodeWidthStr;

    #[test]
    fn c0_c1_and_del_become_one_column_markers() {
        assert_eq!(marker('\x1b'), Some('␛'));
        assert_eq!(marker('\x07'), Some('␇'));
        assert_eq!(marker('\0'), Some('␀'));
        assert_eq!(marker('\r'), Some('␍'));
        assert_eq!(marker('\x1f'), Some('␟'));
        assert_eq!(marker('\x7f'), Some('␡'));
        assert_eq!(marker('\u{9b}'), Some('\u{fffd}'));
        assert_eq!(marker('\u{85}'), Some('\u{fffd}'));
        for c in ['\n', '\t', ' ', 'a', 'é', '\u{a0}', '漢', '\u{200d}'] {
            assert_eq!(marker(c), None, "{c:?}");
        }
        // every control character has one, and it is itself safe and one column wide
        for c in (0u32..0x100)
            .filter_map(char::from_u32)
            .filter(|c| c.is_control())
        {
            if c == '\n' || c == '\t' {
                continue;
            }
            let m = marker(c).unwrap_or_else(|| panic!("{c:?} has no marker"));
            assert!(!m.is_control());
            assert_eq!(m.to_string().width(), 1, "{c:?} -> {m:?}");
        }
    }

    #[test]
    fn text_shows_the_sequences_and_keeps_newlines_and_plain_text() {
        let hostile = "a\x1b]0;PWNED\x07b\x1b]52;c;cHduZWQ=\x07c\x1b[2Jd\r\ne\tf\u{9b}31m";
        assert_eq!(
            text(hostile),
            "a␛]0;PWNED␇b␛]52;c;cHduZWQ=␇c␛[2Jd␍\ne    f\u{fffd}31m"
        );
        assert!(matches!(text("plain ünïcode\nline"), Cow::Borrowed(_)));
        assert!(!text(hostile).contains(|c: char| c.is_control() && c != '\n'));
    }

    #[test]
    fn spans_and_lines_keep_their_styles() {
        let st = Style::new().fg(ratatui::style::Color::Red);
        let l = line(Line::from(vec![
            Span::styled("x\x1by", st),
            Span::raw("ok"),
        ]));
        assert_eq!(l.spans[0].content, "x␛y");
        assert_eq!(l.spans[0].style, st);
        assert_eq!(l.spans[1].content, "ok");
    }

    #[test]
    fn scrub_drops_control_characters_a_widget_left_in_cells() {
        // raw text: ratatui puts the ESC in a cell (its own, or appended to the previous one)
        let mut buf = Buffer::empty(Rect::new(0, 0, 20, 1));
        Paragraph::new("ab\x1b[2Jcd").render(buf.area, &mut buf);
        assert!(buf.content.iter().any(|c| c.symbol().contains('\x1b')));
        assert_eq!(scrub(&mut buf), 1);
        let row: String = buf.content.iter().map(|c| c.symbol()).collect();
        assert!(!row.contains(|c: char| c.is_control()), "{row:?}");
        assert_eq!(row.replace(' ', ""), "ab[2Jcd");
        assert_eq!(scrub(&mut buf), 0);
        // sanitised first, the same text is all visible and nothing is left to scrub
        let mut buf = Buffer::empty(Rect::new(0, 0, 20, 1));
        Paragraph::new(line(Line::raw("ab\x1b[2Jcd"))).render(buf.area, &mut buf);
        let row: String = buf.content.iter().map(|c| c.symbol()).collect();
        assert_eq!(row.trim_end(), "ab␛[2Jcd");
        assert_eq!(scrub(&mut buf), 0);
    }
}
