//! Which messages of a conversation go into the prompt when it outgrows the context.
//!
//! The leading system messages are always kept; the rest is cut at the start of a user message,
//! so whole user/assistant turns are dropped, oldest first, and the newest user message is always
//! kept. Once a cut is needed it goes further than the minimum: the prompt is brought down to
//! `n_ctx - reserve - slack`, so the next few turns fit as they are and reuse the cached prefix
//! (each new cut changes the prompt right after the system prompt, and everything after it is
//! prefilled again). llama.cpp's context shift discards half the context for the same reason.
//!
//! A cut made by an earlier turn is remembered by the caller and passed in as `keep_from`: the
//! prompt never starts earlier than that while the conversation still begins the same way, so a
//! turn after a cut does not bring old messages back (which would change the cached prefix too).

use crate::protocol::Role;
use std::collections::HashMap;

/// The room the prompt must leave.
#[derive(Clone, Copy, Debug)]
pub struct Room {
    pub n_ctx: usize,
    /// Kept free for the reply.
    pub reserve: usize,
    /// Extra room a new cut leaves for the turns after it.
    pub slack: usize,
}

impl Room {
    pub fn new(n_ctx: usize, reserve: usize) -> Room {
        Room {
            n_ctx,
            reserve,
            slack: n_ctx / 4,
        }
    }

    /// The longest prompt that fits.
    fn limit(&self) -> usize {
        self.n_ctx.saturating_sub(self.reserve)
    }

    /// What a new cut brings the prompt down to.
    fn target(&self) -> usize {
        self.limit().saturating_sub(self.slack)
    }
}

/// The chosen prompt: messages `start..` after the system messages `..n_sys`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    pub start: usize,
    /// Tokens of that prompt.
    pub tokens: usize,
    /// False: even the smallest prompt (system + from the newest user message on) leaves less
    /// than the reserve; `start`/`tokens` are that smallest prompt.
    pub fits: bool,
}

/// Leading system messages: kept whatever happens.
pub fn system_prefix(roles: &[Role]) -> usize {
    roles.iter().take_while(|r| **r == Role::System).count()
}

/// Chooses where the kept part of `roles` starts. `count(start)` is the prompt's token count with
/// the system messages and the messages `start..` (it is called a handful of times: first for
/// the cut already in force, then a binary search over the cut points).
pub fn plan(
    roles: &[Role],
    keep_from: usize,
    room: Room,
    mut count: impl FnMut(usize) -> usize,
) -> Plan {
    let n_sys = system_prefix(roles);
    // Cut points: no cut, or the start of a user message up to the newest one.
    let last_user = roles.iter().rposition(|r| *r == Role::User);
    let mut cuts = vec![n_sys];
    if let Some(last) = last_user.filter(|&l| l > n_sys) {
        cuts.extend((n_sys + 1..=last).filter(|&i| roles[i] == Role::User));
    }
    let mut memo: HashMap<usize, usize> = HashMap::new();
    let mut tokens = |start: usize| *memo.entry(start).or_insert_with(|| count(start));
    // the cut in force (or none): as long as it still fits, the cached prefix stays valid
    let first = cuts.partition_point(|&c| c < keep_from).min(cuts.len() - 1);
    let t = tokens(cuts[first]);
    if t <= room.limit() {
        return Plan {
            start: cuts[first],
            tokens: t,
            fits: true,
        };
    }
    // a new cut: the fewest dropped turns that bring the prompt down to the target
    let (mut lo, mut hi) = (first + 1, cuts.len());
    while lo < hi {
        let mid = (lo + hi) / 2;
        if tokens(cuts[mid]) <= room.target() {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    // none reaches the target (a long newest message): drop all that may be dropped
    let j = lo.min(cuts.len() - 1);
    let t = tokens(cuts[j]);
    Plan {
        start: cuts[j],
        tokens: t,
        fits: t <= room.limit(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Role::{Assistant as A, System as S, User as U};

    /// Each message costs its `cost`, the system prompt and the template `base`.
    fn counter(costs: &[usize], base: usize) -> impl Fn(usize) -> usize + '_ {
        move |start| base + costs[..1].iter().sum::<usize>() + costs[start..].iter().sum::<usize>()
    }

    #[test]
    fn a_prompt_that_fits_is_kept_whole_with_one_count() {
        let roles = [S, U, A, U];
        let mut calls = 0;
        let p = plan(&roles, 0, Room::new(256, 64), |s| {
            calls += 1;
            counter(&[10, 20, 30, 40], 5)(s)
        });
        assert_eq!((p.start, p.tokens, p.fits), (1, 105, true));
        assert_eq!(calls, 1);
    }

    #[test]
    fn whole_turns_are_dropped_oldest_first_down_to_the_target() {
        // system 10, then four turns of 30 + 30, the newest user 30: 280 tokens (+5)
        let roles = [S, U, A, U, A, U, A, U, A, U];
        let costs = [10, 30, 30, 30, 30, 30, 30, 30, 30, 30];
        let room = Room::new(256, 64); // limit 192, target 128
        let p = plan(&roles, 0, room, counter(&costs, 5));
        // dropping 2 turns leaves 10 + 150 + 5 = 165 (> 128), 3 turns 105
        assert_eq!((p.start, p.tokens, p.fits), (7, 105, true));
        assert_eq!(
            roles[p.start], U,
            "the kept part starts with a user message"
        );
    }

    #[test]
    fn a_cut_in_force_is_kept_while_it_fits() {
        let roles = [S, U, A, U, A, U, A, U];
        let costs = [10, 30, 30, 30, 30, 30, 30, 30];
        // the minimum would be start 3 (10 + 150 + 5 = 165 <= 192); the remembered cut at 5 stays
        let p = plan(&roles, 5, Room::new(256, 64), counter(&costs, 5));
        assert_eq!((p.start, p.tokens, p.fits), (5, 105, true));
        // a remembered cut past the newest user message: the newest one is kept anyway
        let p = plan(&roles, 99, Room::new(256, 64), counter(&costs, 5));
        assert_eq!(p.start, 7);
    }

    #[test]
    fn a_newest_message_too_long_for_the_room_does_not_fit() {
        let roles = [S, U, A, U];
        let costs = [10, 30, 30, 200];
        let p = plan(&roles, 0, Room::new(256, 64), counter(&costs, 5));
        assert_eq!((p.start, p.tokens, p.fits), (3, 215, false));
        // one that fits the limit but not the target: everything older dropped, and it runs
        let costs = [10, 30, 30, 150];
        let p = plan(&roles, 0, Room::new(256, 64), counter(&costs, 5));
        assert_eq!((p.start, p.tokens, p.fits), (3, 165, true));
    }

    #[test]
    fn no_system_prompt_and_odd_orders() {
        // no system message: the first user message is a cut point like the others
        let roles = [U, A, U, A, U];
        let p = plan(&roles, 0, Room::new(100, 25), |s| 40 * (5 - s));
        assert_eq!((p.start, p.tokens, p.fits), (4, 40, true));
        // a conversation that ends with an assistant message keeps it after the newest user one
        let roles = [S, U, A, U, A];
        let p = plan(&roles, 0, Room::new(100, 25), |s| 10 + 20 * (5 - s));
        assert_eq!(p.start, 3);
        // only a system message: nothing to drop
        let p = plan(&[S], 0, Room::new(100, 25), |_| 90);
        assert_eq!((p.start, p.tokens, p.fits), (1, 90, false));
    }
}
