//! The conversation's scroll position (moved out of app.rs, which had outgrown its size).

/// Scroll position of the conversation: following the bottom, or pinned at a top line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Scroll {
    pinned_top: Option<usize>,
}

impl Scroll {
    pub fn following(&self) -> bool {
        self.pinned_top.is_none()
    }

    /// First visible line for `total` lines in a view `height` high.
    pub fn top(&self, total: usize, height: usize) -> usize {
        let bottom = total.saturating_sub(height);
        self.pinned_top.map_or(bottom, |t| t.min(bottom))
    }

    pub fn up(&mut self, n: usize, total: usize, height: usize) {
        if total <= height {
            return;
        }
        self.pinned_top = Some(self.top(total, height).saturating_sub(n));
    }

    /// Scrolling down to the bottom resumes following the stream.
    pub fn down(&mut self, n: usize, total: usize, height: usize) {
        let Some(t) = self.pinned_top else { return };
        let next = t.min(total.saturating_sub(height)) + n;
        self.pinned_top = (next < total.saturating_sub(height)).then_some(next);
    }

    pub fn follow_bottom(&mut self) {
        self.pinned_top = None;
    }
}
