//! Markdown to styled, width-wrapped lines: headings, paragraphs with emphasis/strong/inline code,
//! bullet and numbered lists (nested), block quotes, rules, and fenced code blocks with syntax
//! colours. Parsing is pulldown-cmark's; layout and wrapping are ours so the chat can cache lines
//! per message and width. Every character that goes into a span passes `sanitize::visible`
//! (control characters drawn as markers, never sent to the terminal).

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

use super::{highlight, sanitize, theme};

/// Word-wraps styled text to `width` columns. `'\n'` in the text forces a break. The first line
/// starts with `first`, the following ones with `rest` (hanging indents, quote bars). Words longer
/// than a line are broken by character.
pub fn wrap(
    spans: &[(String, Style)],
    width: usize,
    first: &[Span<'static>],
    rest: &[Span<'static>],
) -> Vec<Line<'static>> {
    let mut w = Wrapper::new(width, first, rest);
    for (text, style) in spans {
        w.feed(text, *style);
    }
    w.finish()
}

struct Wrapper<'p> {
    width: usize,
    rest: &'p [Span<'static>],
    lines: Vec<Line<'static>>,
    cur: Vec<Span<'static>>,
    cur_w: usize,
    /// Width of the prefix on the current line (content starts after it).
    prefix_w: usize,
    pending_space: Option<Style>,
    word: Vec<(String, Style)>,
    word_w: usize,
}

fn spans_width(s: &[Span<'static>]) -> usize {
    s.iter().map(|s| s.content.width()).sum()
}

impl<'p> Wrapper<'p> {
    fn new(width: usize, first: &[Span<'static>], rest: &'p [Span<'static>]) -> Self {
        let prefix_w = spans_width(first);
        Wrapper {
            width: width.max(1),
            rest,
            lines: Vec::new(),
            cur: first.to_vec(),
            cur_w: prefix_w,
            prefix_w,
            pending_space: None,
            word: Vec::new(),
            word_w: 0,
        }
    }

    fn feed(&mut self, text: &str, style: Style) {
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '\r' && chars.peek() == Some(&'\n') {
                // a CRLF line end is a line end (a lone CR is shown: it would move the cursor)
                continue;
            }
            if c == '\n' {
                self.end_word();
                self.pending_space = None;
                self.break_line();
            } else if c == '\t' || (c.is_whitespace() && !c.is_control()) {
                self.end_word();
                if self.cur_w > self.prefix_w {
                    self.pending_space = Some(style);
                }
            } else {
                let c = sanitize::visible(c);
                match self.word.last_mut() {
                    Some((t, s)) if *s == style => t.push(c),
                    _ => self.word.push((c.to_string(), style)),
                }
                self.word_w += c.width().unwrap_or(0);
            }
        }
    }

    fn break_line(&mut self) {
        let line = std::mem::replace(&mut self.cur, self.rest.to_vec());
        self.lines.push(Line::from(line));
        self.prefix_w = spans_width(self.rest);
        self.cur_w = self.prefix_w;
    }

    fn push(&mut self, text: &str, style: Style) {
        match self.cur.last_mut() {
            Some(last) if last.style == style && self.cur_w > self.prefix_w => {
                last.content.to_mut().push_str(text)
            }
            _ => self.cur.push(Span::styled(text.to_string(), style)),
        }
        self.cur_w += text.width();
    }

    fn end_word(&mut self) {
        if self.word.is_empty() {
            return;
        }
        let word = std::mem::take(&mut self.word);
        let word_w = std::mem::replace(&mut self.word_w, 0);
        let space_w = usize::from(self.pending_space.is_some());
        if self.cur_w > self.prefix_w && self.cur_w + space_w + word_w > self.width {
            self.pending_space = None;
            self.break_line();
        }
        if let Some(st) = self.pending_space.take() {
            if self.cur_w > self.prefix_w {
                self.push(" ", st);
            }
        }
        if self.cur_w + word_w <= self.width {
            for (t, s) in &word {
                self.push(t, *s);
            }
            return;
        }
        // Longer than a whole line: break it by character.
        for (t, s) in &word {
            for c in t.chars() {
                let cw = c.width().unwrap_or(0);
                if self.cur_w + cw > self.width && self.cur_w > self.prefix_w {
                    self.break_line();
                }
                let mut buf = [0u8; 4];
                self.push(c.encode_utf8(&mut buf), *s);
            }
        }
    }

    fn finish(mut self) -> Vec<Line<'static>> {
        self.end_word();
        if self.cur_w > self.prefix_w || self.lines.is_empty() {
            self.lines.push(Line::from(self.cur));
        }
        self.lines
    }
}

enum Container {
    Quote,
    List { next: Option<u64> },
    Item { marker: String, used: bool },
}

struct Renderer {
    width: usize,
    out: Vec<Line<'static>>,
    inline: Vec<(String, Style)>,
    styles: Vec<Style>,
    containers: Vec<Container>,
    heading: Option<HeadingLevel>,
    code: Option<(String, String)>,
}

impl Renderer {
    fn style(&self) -> Style {
        self.styles.iter().fold(theme::TEXT, |acc, s| acc.patch(*s))
    }

    /// Prefixes for the next block's first line and its continuation lines.
    fn prefixes(&mut self) -> (Vec<Span<'static>>, Vec<Span<'static>>) {
        let (mut first, mut rest) = (Vec::new(), Vec::new());
        for c in &mut self.containers {
            match c {
                Container::Quote => {
                    first.push(Span::styled("│ ", theme::QUOTE));
                    rest.push(Span::styled("│ ", theme::QUOTE));
                }
                Container::List { .. } => {}
                Container::Item { marker, used } => {
                    let pad = " ".repeat(marker.width());
                    if *used {
                        first.push(Span::raw(pad.clone()));
                    } else {
                        first.push(Span::styled(marker.clone(), theme::BULLET));
                        *used = true;
                    }
                    rest.push(Span::raw(pad));
                }
            }
        }
        (first, rest)
    }

    fn in_item(&self) -> bool {
        self.containers
            .iter()
            .any(|c| matches!(c, Container::Item { .. }))
    }

    /// A blank line between top-level blocks (not inside tight list items).
    fn gap(&mut self) {
        if self.in_item() {
            return;
        }
        if self
            .out
            .last()
            .is_some_and(|l| l.width() > 0 || !l.spans.is_empty())
        {
            let (_, rest) = self.prefixes();
            self.out.push(Line::from(rest));
        }
    }

    fn flush(&mut self) {
        if self.inline.iter().all(|(t, _)| t.trim().is_empty()) {
            self.inline.clear();
            return;
        }
        let spans = std::mem::take(&mut self.inline);
        let (first, rest) = self.prefixes();
        let lines = wrap(&spans, self.width, &first, &rest);
        self.out.extend(lines);
    }

    fn code_block(&mut self, info: &str, text: &str) {
        self.gap();
        let (first, rest) = self.prefixes();
        let lang = highlight::lang_for(info);
        let mut head = first.clone();
        let label = if info.trim().is_empty() {
            "code".to_string()
        } else {
            sanitize::text(info.trim()).into_owned()
        };
        head.push(Span::styled(format!("┌─ {label}"), theme::CODE_FRAME));
        self.out.push(Line::from(head));
        let mut bar = rest.clone();
        bar.push(Span::styled("│ ", theme::CODE_FRAME));
        let mut state = highlight::State::default();
        for src in text.trim_end_matches('\n').split('\n') {
            let src = src.strip_suffix('\r').unwrap_or(src); // CRLF: the CR is the line end
            let spans: Vec<(String, Style)> = highlight::line(lang, src, &mut state)
                .into_iter()
                .map(|s| (s.content.into_owned(), s.style))
                .collect();
            self.out.extend(wrap_code(&spans, self.width, &bar));
        }
        let mut foot = rest;
        foot.push(Span::styled("└─", theme::CODE_FRAME));
        self.out.push(Line::from(foot));
    }

    fn event(&mut self, ev: Event<'_>) {
        if let Some((_, buf)) = &mut self.code {
            match ev {
                Event::Text(t) => buf.push_str(&t),
                Event::End(TagEnd::CodeBlock) => {
                    // Checked just above that we are in a code block.
                    let (info, text) = self.code.take().expect("in a code block");
                    self.code_block(&info, &text);
                }
                _ => {}
            }
            return;
        }
        match ev {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(t) => self.inline.push((t.into_string(), self.style())),
            Event::Code(t) => self
                .inline
                .push((t.into_string(), self.style().patch(theme::INLINE_CODE))),
            Event::SoftBreak => self.inline.push((" ".into(), self.style())),
            Event::HardBreak => self.inline.push(("\n".into(), self.style())),
            Event::Rule => {
                self.flush();
                self.gap();
                let (first, _) = self.prefixes();
                let w = self.width.saturating_sub(spans_width(&first)).min(40);
                let mut l = first;
                l.push(Span::styled("─".repeat(w), theme::RULE));
                self.out.push(Line::from(l));
            }
            Event::Html(t) | Event::InlineHtml(t) => {
                self.inline.push((t.into_string(), theme::DIM))
            }
            Event::TaskListMarker(done) => self
                .inline
                .push((if done { "[x] " } else { "[ ] " }.into(), theme::BULLET)),
            _ => {}
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => {
                self.flush();
                self.gap();
            }
            Tag::Heading { level, .. } => {
                self.flush();
                self.gap();
                self.heading = Some(level);
                let n = level as usize;
                let st = if level == HeadingLevel::H1 {
                    theme::H1
                } else {
                    theme::HEADING
                };
                self.styles.push(st);
                self.inline.push((format!("{} ", "#".repeat(n)), st));
            }
            Tag::BlockQuote(_) => {
                self.flush();
                self.gap();
                self.containers.push(Container::Quote);
                self.styles.push(theme::QUOTE);
            }
            Tag::CodeBlock(kind) => {
                self.flush();
                let info = match kind {
                    CodeBlockKind::Fenced(i) => i.into_string(),
                    CodeBlockKind::Indented => String::new(),
                };
                self.code = Some((info, String::new()));
            }
            Tag::List(start) => {
                self.flush();
                self.gap();
                self.containers.push(Container::List { next: start });
            }
            Tag::Item => {
                self.flush();
                let marker = match self
                    .containers
                    .iter_mut()
                    .rev()
                    .find(|c| matches!(c, Container::List { .. }))
                {
                    Some(Container::List { next: Some(n) }) => {
                        let m = format!("{n}. ");
                        *n += 1;
                        m
                    }
                    _ => "• ".to_string(),
                };
                self.containers.push(Container::Item {
                    marker,
                    used: false,
                });
            }
            Tag::Emphasis => self.styles.push(theme::EMPHASIS),
            Tag::Strong => self.styles.push(theme::STRONG),
            Tag::Strikethrough => self.styles.push(theme::STRIKE),
            Tag::Link { .. } => self.styles.push(theme::LINK),
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => self.flush(),
            TagEnd::Heading(_) => {
                self.flush();
                self.heading = None;
                self.styles.pop();
            }
            TagEnd::BlockQuote(_) => {
                self.flush();
                self.containers.pop();
                self.styles.pop();
            }
            TagEnd::List(_) => {
                self.flush();
                self.containers.pop();
            }
            TagEnd::Item => {
                self.flush();
                self.containers.pop();
            }
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough | TagEnd::Link => {
                self.styles.pop();
            }
            _ => {}
        }
    }
}

/// Code keeps its spaces: hard-wrap by character under a `│ ` bar.
fn wrap_code(spans: &[(String, Style)], width: usize, bar: &[Span<'static>]) -> Vec<Line<'static>> {
    let bar_w = spans_width(bar);
    let mut lines = Vec::new();
    let mut cur: Vec<Span<'static>> = bar.to_vec();
    let mut w = bar_w;
    for (text, style) in spans {
        let mut piece = String::new();
        for c in text.chars() {
            let c = sanitize::visible(c);
            let cw = if c == '\t' {
                sanitize::TAB.len()
            } else {
                c.width().unwrap_or(0)
            };
            if w + cw > width && w > bar_w {
                if !piece.is_empty() {
                    cur.push(Span::styled(std::mem::take(&mut piece), *style));
                }
                lines.push(Line::from(std::mem::replace(&mut cur, bar.to_vec())));
                w = bar_w;
            }
            if c == '\t' {
                piece.push_str(sanitize::TAB);
            } else {
                piece.push(c);
            }
            w += cw;
        }
        if !piece.is_empty() {
            cur.push(Span::styled(piece, *style));
        }
    }
    lines.push(Line::from(cur));
    lines
}

/// Renders markdown to lines at most `width` columns wide.
pub fn render(md: &str, width: usize) -> Vec<Line<'static>> {
    let mut r = Renderer {
        width: width.max(8),
        out: Vec::new(),
        inline: Vec::new(),
        styles: Vec::new(),
        containers: Vec::new(),
        heading: None,
        code: None,
    };
    for ev in Parser::new_ext(
        md,
        Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS,
    ) {
        r.event(ev);
    }
    // A streamed reply may end inside an unclosed fence: show what there is.
    if let Some((info, text)) = r.code.take() {
        r.code_block(&info, &text);
    }
    r.flush();
    r.out
}

/// Plain text (user messages): newlines kept, words wrapped.
pub fn plain(text: &str, width: usize, style: Style) -> Vec<Line<'static>> {
    wrap(&[(text.to_string(), style)], width.max(8), &[], &[])
}

#[cfg(test)]
pub(crate) fn to_text(lines: &[Line<'_>]) -> Vec<String> {
    lines
        .iter()
        .map(|l| {
            l.spans
                .iter()
                .map(|s| s.content.as_ref())
                .collect::<String>()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_words_to_width_and_breaks_long_words() {
        let lines = wrap(
            &[("the quick brown fox jumps".into(), theme::TEXT)],
            10,
            &[],
            &[],
        );
        assert_eq!(to_text(&lines), ["the quick", "brown fox", "jumps"]);
        let lines = wrap(&[("abcdefghijklmnop xy".into(), theme::TEXT)], 6, &[], &[]);
        assert_eq!(to_text(&lines), ["abcdef", "ghijkl", "mnop", "xy"]);
        for l in &lines {
            assert!(l.width() <= 6);
        }
    }

    #[test]
    fn wide_characters_count_two_columns() {
        let lines = wrap(&[("漢字漢字 漢字".into(), theme::TEXT)], 8, &[], &[]);
        assert_eq!(to_text(&lines), ["漢字漢字", "漢字"]);
    }

    #[test]
    fn lists_headings_and_code() {
        let md = "# Title\n\nSome *text* here.\n\n- one\n- two is longer than the width\n  1. nested\n\n```rust\nfn main() {}\n```\n";
        let text = to_text(&render(md, 24));
        assert_eq!(
            text,
            [
                "# Title",
                "",
                "Some text here.",
                "",
                "• one",
                "• two is longer than the",
                "  width",
                "  1. nested",
                "",
                "┌─ rust",
                "│ fn main() {}",
                "└─",
            ]
        );
        let lines = render(md, 24);
        assert!(lines[9 + 1]
            .spans
            .iter()
            .any(|s| s.content == "fn" && s.style == theme::CODE_KEYWORD));
        for l in &lines {
            assert!(l.width() <= 24, "{l:?}");
        }
    }

    #[test]
    fn unclosed_fence_while_streaming_still_renders() {
        let text = to_text(&render("Look:\n\n```py\nx = 1\n", 30));
        assert_eq!(text, ["Look:", "", "┌─ py", "│ x = 1", "└─"]);
    }

    #[test]
    fn plain_keeps_newlines() {
        assert_eq!(
            to_text(&plain("a\n\nb c", 10, theme::TEXT)),
            ["a", "", "b c"]
        );
    }
}
