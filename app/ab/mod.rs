//! A/B of engine flags (`strata ab`, issue 29): the same prompts, sampler and seed under two or
//! more flag sets, each run in its own engine process with its flags latched, interleaved
//! A B A B ... for R rounds; per arm the per-window ms, tok/s, drafts, memory, the output
//! against the first arm's (identical or where it parts) and the NLL through the decode windows;
//! a table, Markdown and JSON. Library code, so a TUI pane can run and compare the same way:
//!
//! - `spec`: `Arm` (a flag set by name: `kreg`, `hc-q8+gr-fused`, `STRATA_FUSED=0`, a preset's
//!   `[ab.arms.NAME]`), `RunSpec` (what every arm shares), `AbSection` (a preset's `[ab]`).
//! - `runner`: `run(spec, program, progress)` -> `AbRun` (every run's windows, turns, token ids,
//!   latch lines, memory); `run_arm` for one arm and round; `Progress` events as it goes.
//! - `compare`: `compare(run, decode)` -> `Comparison` (per-arm summaries, checks, warnings);
//!   `first_divergence` / `divergence` on two token sequences.
//! - `report`: `table`, `markdown`, `json`.
//! - `stats`: `Spread` (median, quartiles, min, max).

pub mod compare;
pub mod report;
pub mod runner;
pub mod spec;
pub mod stats;
