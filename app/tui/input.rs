//! The multi-line message editor (state only; `panes/input.rs` draws it).

/// Lines of text and a cursor (row, column in characters).
#[derive(Debug, Clone, PartialEq)]
pub struct Input {
    lines: Vec<String>,
    row: usize,
    col: usize,
}

impl Default for Input {
    fn default() -> Self {
        Input {
            lines: vec![String::new()],
            row: 0,
            col: 0,
        }
    }
}

fn byte_at(s: &str, col: usize) -> usize {
    s.char_indices().nth(col).map_or(s.len(), |(i, _)| i)
}

impl Input {
    pub fn lines(&self) -> &[String] {
        &self.lines
    }

    pub fn cursor(&self) -> (usize, usize) {
        (self.row, self.col)
    }

    pub fn is_empty(&self) -> bool {
        self.lines.len() == 1 && self.lines[0].is_empty()
    }

    pub fn text(&self) -> String {
        self.lines.join("\n")
    }

    /// Returns the text and empties the editor.
    pub fn take(&mut self) -> String {
        let t = self.text();
        *self = Input::default();
        t
    }

    pub fn insert(&mut self, c: char) {
        if c == '\n' {
            return self.newline();
        }
        let line = &mut self.lines[self.row];
        let at = byte_at(line, self.col);
        line.insert(at, c);
        self.col += 1;
    }

    pub fn insert_str(&mut self, s: &str) {
        for c in s.chars().filter(|c| *c != '\r') {
            self.insert(c);
        }
    }

    pub fn newline(&mut self) {
        let line = &mut self.lines[self.row];
        let at = byte_at(line, self.col);
        let rest = line.split_off(at);
        self.row += 1;
        self.lines.insert(self.row, rest);
        self.col = 0;
    }

    pub fn backspace(&mut self) {
        if self.col > 0 {
            let line = &mut self.lines[self.row];
            let at = byte_at(line, self.col - 1);
            line.remove(at);
            self.col -= 1;
        } else if self.row > 0 {
            let line = self.lines.remove(self.row);
            self.row -= 1;
            self.col = self.lines[self.row].chars().count();
            self.lines[self.row].push_str(&line);
        }
    }

    pub fn delete(&mut self) {
        let len = self.lines[self.row].chars().count();
        if self.col < len {
            let line = &mut self.lines[self.row];
            let at = byte_at(line, self.col);
            line.remove(at);
        } else if self.row + 1 < self.lines.len() {
            let next = self.lines.remove(self.row + 1);
            self.lines[self.row].push_str(&next);
        }
    }

    pub fn left(&mut self) {
        if self.col > 0 {
            self.col -= 1;
        } else if self.row > 0 {
            self.row -= 1;
            self.col = self.lines[self.row].chars().count();
        }
    }

    pub fn right(&mut self) {
        if self.col < self.lines[self.row].chars().count() {
            self.col += 1;
        } else if self.row + 1 < self.lines.len() {
            self.row += 1;
            self.col = 0;
        }
    }

    /// Moves up a line; false if already on the first line.
    pub fn up(&mut self) -> bool {
        if self.row == 0 {
            return false;
        }
        self.row -= 1;
        self.col = self.col.min(self.lines[self.row].chars().count());
        true
    }

    pub fn down(&mut self) -> bool {
        if self.row + 1 >= self.lines.len() {
            return false;
        }
        self.row += 1;
        self.col = self.col.min(self.lines[self.row].chars().count());
        true
    }

    pub fn home(&mut self) {
        self.col = 0;
    }

    pub fn end(&mut self) {
        self.col = self.lines[self.row].chars().count();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_line_editing() {
        let mut i = Input::default();
        i.insert_str("héllo");
        i.left();
        i.left();
        i.newline();
        assert_eq!(i.text(), "hél\nlo");
        assert_eq!(i.cursor(), (1, 0));
        i.backspace();
        assert_eq!(i.text(), "héllo");
        assert_eq!(i.cursor(), (0, 3));
        i.delete();
        assert_eq!(i.text(), "hélo");
        i.end();
        i.insert('\n');
        i.insert('x');
        assert!(i.up());
        assert!(!i.up());
        assert_eq!(i.cursor(), (0, 1));
        assert_eq!(i.take(), "hélo\nx");
        assert!(i.is_empty());
    }
}
