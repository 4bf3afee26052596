//! The A/B pane's state (issue 29): two arms (flag sets: the built-in ones and the presets'
//! `[ab.arms]`), one prompt, each arm in its own engine process started with its flags
//! latched (through the engine client: the runtime spawns it on `AbAction::Spawn`), both
//! replies as they stream, then where they part (`ab::compare::divergence`), the per-window ms
//! of each and the ratio. The comparison, statistics and report are `strata ab`'s (app/ab/);
//! this file only drives the two engines' protocol and keeps what they said.
//!
//! Two engines run at once when two more copies of the model fit in the memory the host has
//! free (`plan`), else one after the other; the pane says which and why.

use std::collections::BTreeMap;
use std::path::Path;

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use strata::protocol::{
    ChatMessage, DeviceSplit, Devices, Event, Generate, Ids, Load, Loaded, Request, Role, Stop,
    Turn, Window,
};

use super::{Action, App, Level, Overlay};
use crate::ab::compare::{self, Divergence};
use crate::ab::spec::{Arm, RunSpec, BUILTIN_ARMS};
use crate::ab::stats::{ratio, Spread};
use crate::client::ClientEvent;
use crate::tui::ab_medians::{key_of_toggles, Medians};
use crate::tui::input::Input;
use crate::tui::strings;

/// The seed of an A/B whose sampler has none: both arms must draw the same random numbers.
pub const AB_SEED: u64 = 42;
/// Tokens per reply when the preset's `[ab]` does not say.
pub const AB_TOKENS: u32 = 128;
/// Context of an arm's engine when the preset asks for the automatic one (0): one prompt and
/// one reply need far less than the training context, and a smaller KV cache lets both fit.
pub const AB_CTX: u32 = 4096;
/// The generate id each arm's engine runs (one generation per engine).
const GEN: u64 = 1;
/// Memory one engine takes beyond its weights (the SYCL runtime, kernels, a 4096-token KV
/// cache, scratch): SmolLM2 at ctx 2048 ran at 367 MiB RSS for 92 MiB of weights (docs/tui.md).
const ENGINE_OVERHEAD: u64 = 768 << 20;

#[derive(Debug, Clone, PartialEq)]
pub enum AbAction {
    /// Start arm `arm`'s engine for run `run` with these toggles and variables.
    Spawn {
        run: u64,
        arm: usize,
        flags: BTreeMap<String, bool>,
        env: BTreeMap<String, String>,
    },
    Send {
        arm: usize,
        req: Request,
    },
    Shutdown {
        arm: usize,
    },
    /// Both arms answered: the runtime decodes their token ids with the model's tokenizer and
    /// calls `App::ab_finish`.
    Finished,
    /// Write the report (Markdown + JSON) of the finished run.
    Export,
    /// Write the medians per flag set beside the history.
    SaveMedians,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Phase {
    /// Sequential: waits for the first arm.
    Waiting,
    Starting,
    Loading,
    Generating,
    Done,
    Failed(String),
    Stopped,
}

impl Phase {
    pub fn finished(&self) -> bool {
        matches!(self, Phase::Done | Phase::Failed(_) | Phase::Stopped)
    }
}

/// One arm's engine and what it said.
#[derive(Debug, Clone, PartialEq)]
pub struct ArmState {
    pub arm: Arm,
    pub phase: Phase,
    pub pid: Option<u32>,
    pub hello_flags: BTreeMap<String, bool>,
    /// Its engine's stderr lines naming a STRATA_ variable (the latch lines), once each.
    pub latch: Vec<String>,
    pub loaded: Option<Loaded>,
    pub text: String,
    pub windows: Vec<Window>,
    pub turn: Option<Turn>,
    pub ids: Option<Ids>,
    pub devices: Option<Devices>,
}

impl ArmState {
    fn new(arm: Arm, phase: Phase) -> ArmState {
        ArmState {
            arm,
            phase,
            pid: None,
            hello_flags: BTreeMap::new(),
            latch: Vec::new(),
            loaded: None,
            text: String::new(),
            windows: Vec::new(),
            turn: None,
            ids: None,
            devices: None,
        }
    }

    /// Median and spread of its windows' ms so far.
    pub fn window_ms(&self) -> Option<Spread> {
        Spread::of(&self.windows.iter().map(|w| w.ms).collect::<Vec<_>>())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Parallel,
    Sequential,
}

/// How the arms run, and the memory figures that decided it (shown in the pane).
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub mode: Mode,
    pub note: String,
}

/// Two engines at once when both fit in 80% of the memory available now (the chat's engine is
/// already in `available`), else one after the other. Unknown memory: one after the other.
pub fn plan(model_bytes: u64, available: Option<u64>) -> Plan {
    let per = model_bytes + ENGINE_OVERHEAD;
    match available {
        Some(avail) if 2 * per <= avail / 5 * 4 => Plan {
            mode: Mode::Parallel,
            note: strings::ab_parallel(per, avail),
        },
        Some(avail) => Plan {
            mode: Mode::Sequential,
            note: strings::ab_sequential(per, avail),
        },
        None => Plan {
            mode: Mode::Sequential,
            note: strings::AB_MEMORY_UNKNOWN.to_string(),
        },
    }
}

/// `MemAvailable` of /proc/meminfo in bytes.
fn mem_available() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kb: u64 = s
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// Where the replies part, placed in the columns' text.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// None: identical replies.
    pub divergence: Option<Divergence>,
    /// Per arm: characters of its text before the differing token, and the token's characters.
    pub at: [(usize, usize); 2],
    /// Every variable arm B changes keeps results bitwise (the flag registry): identical replies
    /// are expected, and a divergence is a finding.
    pub bitwise: bool,
    /// What makes the comparison doubtful (`strata ab`'s checks that apply to one run): other
    /// prompt tokens in the two engines, a bitwise arm whose reply differs.
    pub warnings: Vec<String>,
}

/// One A/B: the spec both arms share and the arms' states.
#[derive(Debug, Clone, PartialEq)]
pub struct AbRunState {
    /// Tags the engines' events: those of an earlier run are dropped.
    pub run: u64,
    pub spec: RunSpec,
    pub arms: [ArmState; 2],
    pub plan: Plan,
    /// UTC `YYYY-MM-DD HH:MM` when it started (the report's).
    pub started: String,
    pub started_at: std::time::Instant,
    /// The machine's load average when it started (the report's, with the one at its end).
    pub load0: Option<f64>,
    pub outcome: Option<Outcome>,
}

impl AbRunState {
    /// Median window ms of arm B over arm A's.
    pub fn ratio(&self) -> Option<f64> {
        let (a, b) = (self.arms[0].window_ms()?, self.arms[1].window_ms()?);
        ratio(a.median, b.median)
    }

    pub fn finished(&self) -> bool {
        self.arms.iter().all(|a| a.phase.finished())
    }

    pub fn both_done(&self) -> bool {
        self.arms.iter().all(|a| a.phase == Phase::Done)
    }
}

#[derive(Debug, Clone, Default)]
pub struct AbState {
    /// The flag sets on offer: the built-in arms, then the presets' named and listed arms.
    pub choices: Vec<Arm>,
    /// Index into `choices` of arm A and arm B.
    pub pick: [usize; 2],
    /// The column whose arm Up/Down changes.
    pub focus: usize,
    pub prompt: Input,
    pub run: Option<AbRunState>,
    next_run: u64,
    /// Per-window ms per flag set over this conversation (persisted beside the history).
    pub medians: Medians,
    /// Changed since the last write.
    pub medians_dirty: bool,
}

impl App {
    /// The arms on offer: built-in first, then every preset's `[ab]` arms (the current
    /// preset's first), each name once. A preset whose `[ab]` does not parse adds none (its
    /// file was refused at load with the reason).
    fn ab_choices(&self) -> Vec<Arm> {
        let none = BTreeMap::new();
        let mut out: Vec<Arm> = BUILTIN_ARMS
            .iter()
            .filter_map(|(n, _)| Arm::parse(n, &none).ok())
            .collect();
        let presets = std::iter::once(&self.preset).chain(&self.presets);
        for ab in presets.filter_map(|p| p.ab.as_ref()) {
            let Ok(named) = ab.named_arms() else { continue };
            let listed = ab.run.iter().filter_map(|n| Arm::parse(n, &named).ok());
            for a in named.values().cloned().chain(listed) {
                if !out.iter().any(|o| o.name == a.name) {
                    out.push(a);
                }
            }
        }
        out
    }

    /// Ctrl+B / F2: the pane, its arms preselected from the preset's `[ab] run` (else the
    /// defaults against the first other arm) and its prompt from `[ab] prompts`.
    pub(super) fn open_ab(&mut self) {
        if self.ab.choices.is_empty() {
            self.ab.choices = self.ab_choices();
            let ab = self.preset.ab.clone().unwrap_or_default();
            let find = |n: &str| self.ab.choices.iter().position(|a| a.name == n);
            let a = ab.run.first().and_then(|n| find(n)).unwrap_or(0);
            let b = ab
                .run
                .get(1)
                .and_then(|n| find(n))
                .unwrap_or(if a == 0 { 1 } else { 0 });
            self.ab.pick = [a, b];
            if self.ab.prompt.is_empty() {
                if let Some(p) = ab.prompts.first() {
                    self.ab.prompt.insert_str(p);
                }
            }
        }
        self.overlay = Overlay::Ab;
    }

    pub(super) fn ab_key(&mut self, k: KeyEvent) -> Vec<Action> {
        let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
        let n = self.ab.choices.len().max(1);
        match k.code {
            KeyCode::Esc | KeyCode::F(2) => return self.ab_close(),
            KeyCode::Char('b') if ctrl => return self.ab_close(),
            KeyCode::Char('e') if ctrl => return self.ab_export(),
            KeyCode::Char('u') if ctrl => {
                self.ab.prompt.take();
            }
            KeyCode::Tab | KeyCode::BackTab => self.ab.focus = 1 - self.ab.focus,
            KeyCode::Up => {
                let p = &mut self.ab.pick[self.ab.focus];
                *p = (*p + n - 1) % n;
            }
            KeyCode::Down => {
                let p = &mut self.ab.pick[self.ab.focus];
                *p = (*p + 1) % n;
            }
            KeyCode::Enter => return self.ab_start(),
            KeyCode::Char(c) if !ctrl => self.ab.prompt.insert(c),
            KeyCode::Backspace => self.ab.prompt.backspace(),
            KeyCode::Delete => self.ab.prompt.delete(),
            KeyCode::Left => self.ab.prompt.left(),
            KeyCode::Right => self.ab.prompt.right(),
            KeyCode::Home => self.ab.prompt.home(),
            KeyCode::End => self.ab.prompt.end(),
            _ => {}
        }
        Vec::new()
    }

    /// Esc: stops a run under way (both engines shut down, the replies kept as they stand);
    /// with nothing running, closes the pane (a finished run stays for the next visit).
    fn ab_close(&mut self) -> Vec<Action> {
        let Some(run) = self.ab.run.as_mut().filter(|r| !r.finished()) else {
            self.overlay = Overlay::None;
            return Vec::new();
        };
        let mut acts = Vec::new();
        for (i, a) in run.arms.iter_mut().enumerate() {
            if !a.phase.finished() {
                a.phase = Phase::Stopped;
                acts.push(Action::Ab(AbAction::Shutdown { arm: i }));
            }
        }
        self.notify(Level::Info, strings::AB_STOPPED);
        acts
    }

    /// Enter: the spec from the preset (model, system prompt, sampler with a fixed seed,
    /// speculation, split; `[ab] n` tokens), then the arms' engines.
    fn ab_start(&mut self) -> Vec<Action> {
        if self.ab.run.as_ref().is_some_and(|r| !r.finished()) {
            self.notify(Level::Warn, strings::AB_BUSY);
            return Vec::new();
        }
        let prompt = self.ab.prompt.text();
        if prompt.trim().is_empty() {
            self.notify(Level::Warn, strings::AB_NO_PROMPT);
            return Vec::new();
        }
        let arms: Vec<Arm> = self
            .ab
            .pick
            .iter()
            .filter_map(|&i| self.ab.choices.get(i).cloned())
            .collect();
        let model = match &self.loaded {
            Some(l) => Ok(std::path::PathBuf::from(&l.model)),
            None => self.preset.model_path(),
        };
        let model = match model {
            Ok(m) => m,
            Err(e) => {
                self.notify(Level::Error, e);
                return Vec::new();
            }
        };
        let n = self
            .preset
            .ab
            .as_ref()
            .and_then(|a| a.n)
            .unwrap_or(AB_TOKENS);
        let mut sampling = self.preset.sampling.clone();
        sampling.seed = Some(sampling.seed.unwrap_or(AB_SEED));
        sampling.max_tokens = n;
        let spec = RunSpec {
            model,
            prompts: vec![prompt],
            system: self.preset.system_prompt.clone(),
            n,
            spec: self.preset.spec,
            ctx: if self.preset.ctx == 0 {
                AB_CTX
            } else {
                self.preset.ctx
            },
            split_cpu: self.preset.split_cpu,
            sampling,
            reps: 1,
            arms,
            nll: None,
        };
        if let Err(e) = spec.validate() {
            self.notify(Level::Warn, strings::ab_refused(&e.to_string()));
            return Vec::new();
        }
        let bytes = std::fs::metadata(&spec.model).map_or(0, |m| m.len());
        let plan = plan(bytes, mem_available());
        self.ab_begin(spec, plan)
    }

    /// Starts `spec` under `plan` (the tests choose the plan).
    pub fn ab_begin(&mut self, spec: RunSpec, plan: Plan) -> Vec<Action> {
        self.ab.next_run += 1;
        let run = self.ab.next_run;
        let second = match plan.mode {
            Mode::Parallel => Phase::Starting,
            Mode::Sequential => Phase::Waiting,
        };
        let arms = [
            ArmState::new(spec.arms[0].clone(), Phase::Starting),
            ArmState::new(spec.arms[1].clone(), second),
        ];
        // the pickers show the arms that run
        if self.ab.choices.is_empty() {
            self.ab.choices = self.ab_choices();
        }
        for (i, a) in arms.iter().enumerate() {
            if let Some(k) = self.ab.choices.iter().position(|c| c.name == a.arm.name) {
                self.ab.pick[i] = k;
            }
        }
        let mut acts = vec![spawn(run, &arms[0].arm, 0)];
        if plan.mode == Mode::Parallel {
            acts.push(spawn(run, &arms[1].arm, 1));
        }
        self.notify(Level::Info, plan.note.clone());
        self.ab.run = Some(AbRunState {
            run,
            spec,
            arms,
            plan,
            started: crate::ab::runner::utc_now(),
            started_at: std::time::Instant::now(),
            load0: crate::ab::runner::load_avg(),
            outcome: None,
        });
        acts
    }

    /// A line an arm's engine wrote on stderr (the flag latch lines are kept).
    pub fn ab_stderr(&mut self, run: u64, arm: usize, line: &str) {
        if let Some(a) = self.ab_arm(run, arm) {
            if line.contains("STRATA_") && !a.latch.iter().any(|l| l == line) {
                a.latch.push(line.to_string());
            }
        }
    }

    fn ab_arm(&mut self, run: u64, arm: usize) -> Option<&mut ArmState> {
        self.ab
            .run
            .as_mut()
            .filter(|r| r.run == run)
            .and_then(|r| r.arms.get_mut(arm))
    }

    /// What arm `arm`'s engine client said: the protocol of one arm is hello -> load ->
    /// generate -> ids -> stats -> shutdown.
    pub fn ab_client(&mut self, run: u64, arm: usize, ev: ClientEvent) -> Vec<Action> {
        let Some(r) = self.ab.run.as_ref().filter(|r| r.run == run) else {
            return Vec::new();
        };
        let spec = r.spec.clone();
        let Some(a) = self.ab_arm(run, arm) else {
            return Vec::new();
        };
        if a.phase.finished() {
            return Vec::new();
        }
        let send = |req| vec![Action::Ab(AbAction::Send { arm, req })];
        match ev {
            ClientEvent::Spawned { pid } => a.pid = Some(pid),
            ClientEvent::Engine(Event::Hello(h)) => {
                a.pid = Some(h.pid);
                a.hello_flags = h.flags;
                let mut sampling = spec.sampling.clone();
                sampling.max_tokens = spec.n;
                return send(Request::Load(Load {
                    model: spec.model.display().to_string(),
                    ctx: spec.ctx,
                    devices: DeviceSplit {
                        split_cpu: spec.split_cpu,
                    },
                    spec: spec.spec,
                    sampling,
                }));
            }
            ClientEvent::Engine(Event::Progress(_)) => a.phase = Phase::Loading,
            ClientEvent::Engine(Event::Loaded(l)) => {
                a.loaded = Some(l);
                a.phase = Phase::Generating;
                let mut messages = Vec::new();
                if !spec.system.is_empty() {
                    messages.push(ChatMessage {
                        role: Role::System,
                        content: spec.system.clone(),
                    });
                }
                messages.push(ChatMessage {
                    role: Role::User,
                    content: spec.prompts[0].clone(),
                });
                return send(Request::Generate(Generate {
                    id: GEN,
                    messages,
                    sampling: spec.sampling.clone(),
                    spec: Some(spec.spec),
                    parse_special: false,
                }));
            }
            ClientEvent::Engine(Event::Token(t)) if t.id == GEN => a.text.push_str(&t.text),
            ClientEvent::Engine(Event::Window(w)) if w.id == GEN => a.windows.push(w),
            ClientEvent::Engine(Event::Turn(t)) if t.id == GEN => {
                let failed = t.stop == Stop::Error;
                a.turn = Some(t);
                if !failed {
                    return send(Request::Ids { id: GEN });
                }
            }
            ClientEvent::Engine(Event::Ids(i)) if i.id == GEN => {
                a.ids = Some(i);
                return send(Request::Stats {});
            }
            ClientEvent::Engine(Event::Devices(d)) if a.ids.is_some() => {
                a.devices = Some(d);
                a.phase = Phase::Done;
                return self.ab_arm_ended(arm);
            }
            ClientEvent::Engine(Event::Error(e)) => {
                return self.ab_arm_failed(run, arm, format!("engine: {}", e.message))
            }
            ClientEvent::Died { reason, .. } => return self.ab_arm_failed(run, arm, reason),
            ClientEvent::GaveUp { attempts } => {
                return self.ab_arm_failed(run, arm, strings::gave_up(attempts))
            }
            _ => {}
        }
        Vec::new()
    }

    fn ab_arm_failed(&mut self, run: u64, arm: usize, why: String) -> Vec<Action> {
        if let Some(a) = self.ab_arm(run, arm) {
            a.phase = Phase::Failed(why.clone());
            let name = a.arm.name.clone();
            self.notify(Level::Error, strings::ab_arm_failed(&name, &why));
        }
        // a sequential run's second arm does not start after a failed first
        if let Some(b) = self
            .ab
            .run
            .as_mut()
            .map(|r| &mut r.arms[1])
            .filter(|b| arm == 0 && b.phase == Phase::Waiting)
        {
            b.phase = Phase::Stopped;
        }
        vec![Action::Ab(AbAction::Shutdown { arm })]
    }

    /// Arm `arm` is done: shut its engine down, start the next (sequential), or hand both
    /// replies to the runtime to compare.
    fn ab_arm_ended(&mut self, arm: usize) -> Vec<Action> {
        let mut acts = vec![Action::Ab(AbAction::Shutdown { arm })];
        let Some(r) = self.ab.run.as_mut() else {
            return acts;
        };
        if arm == 0 && r.arms[1].phase == Phase::Waiting {
            r.arms[1].phase = Phase::Starting;
            acts.push(spawn(r.run, &r.arms[1].arm, 1));
        } else if r.both_done() {
            acts.push(Action::Ab(AbAction::Finished));
        }
        acts
    }

    /// Both replies in: where they part (`decode`: token ids -> text, the model's tokenizer),
    /// and each arm's windows added to its flag set's medians.
    pub fn ab_finish(&mut self, decode: &dyn Fn(&[u32]) -> String) -> Vec<Action> {
        let Some(r) = self.ab.run.as_mut().filter(|r| r.both_done()) else {
            return Vec::new();
        };
        let reply = |i: usize| r.arms[i].ids.as_ref().map_or(&[][..], |x| &x.reply[..]);
        let (base, other) = (reply(0), reply(1));
        let divergence = compare::divergence(base, other, decode);
        let at = |ids: &[u32], d: &Divergence| {
            let before = decode(&ids[..d.position.min(ids.len())]).chars().count();
            let len = ids
                .get(d.position)
                .map_or(0, |&t| decode(&[t]).chars().count());
            (before, len)
        };
        let bitwise = r.arms[1].arm.bitwise_with(&r.arms[0].arm);
        let mut warnings = Vec::new();
        let prompt = |i: usize| r.arms[i].ids.as_ref().map(|x| &x.prompt);
        if prompt(0) != prompt(1) {
            warnings.push(strings::AB_OTHER_PROMPT_TOKENS.to_string());
        }
        if bitwise && divergence.is_some() {
            warnings.push(strings::ab_bitwise_differs(&r.arms[1].arm.describe()));
        }
        let outcome = Outcome {
            at: divergence
                .as_ref()
                .map_or([(0, 0); 2], |d| [at(base, d), at(other, d)]),
            divergence,
            bitwise,
            warnings,
        };
        let (level, text) = match (&outcome.divergence, outcome.warnings.first()) {
            (_, Some(w)) => (Level::Warn, w.clone()),
            (None, None) => (Level::Info, strings::ab_identical(base.len())),
            (Some(d), None) => (
                Level::Info,
                strings::ab_parts(d.position, &d.base_piece, &d.arm_piece),
            ),
        };
        r.outcome = Some(outcome);
        let recs: Vec<(String, String, Vec<f64>)> = r
            .arms
            .iter()
            .map(|a| {
                let ms = a.windows.iter().map(|w| w.ms).collect();
                (a.arm.describe(), a.arm.name.clone(), ms)
            })
            .collect();
        for (key, name, ms) in recs {
            self.ab.medians.record(&key, &name, &ms);
        }
        self.ab.medians_dirty = true;
        self.notify(level, text);
        vec![Action::Ab(AbAction::SaveMedians)]
    }

    /// Ctrl+E in the pane: the report of a run whose arms both answered.
    fn ab_export(&mut self) -> Vec<Action> {
        match &self.ab.run {
            Some(r) if r.outcome.is_some() => vec![Action::Ab(AbAction::Export)],
            _ => {
                self.notify(Level::Warn, strings::AB_NOTHING_TO_EXPORT);
                Vec::new()
            }
        }
    }

    /// A verify window of the chat's own engine: counted under its latched flag set.
    pub(super) fn ab_on_chat_window(&mut self, w: &Window) {
        let key = key_of_toggles(&self.active_flags);
        self.ab.medians.record(&key, "chat", &[w.ms]);
        self.ab.medians_dirty = true;
    }

    /// The medians read for this conversation (the runtime loads them at start and whenever
    /// the conversation changes).
    pub fn ab_set_medians(&mut self, m: Medians) {
        self.ab.medians = m;
        self.ab.medians_dirty = false;
    }

    /// The model file the A/B ran (for the tokenizer the runtime loads).
    pub fn ab_model(&self) -> Option<&Path> {
        self.ab.run.as_ref().map(|r| r.spec.model.as_path())
    }
}

fn spawn(run: u64, arm: &Arm, i: usize) -> Action {
    Action::Ab(AbAction::Spawn {
        run,
        arm: i,
        flags: arm.toggles(),
        env: arm.env(),
    })
}
