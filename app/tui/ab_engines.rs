//! The A/B pane's side effects (app/ab.rs asks, this does): the arms' engine processes through
//! the engine client (each started with its flags latched, its events and stderr lines tagged
//! with the run and the arm), the tokenizer that turns the replies' token ids into the
//! divergence's text, the report through `strata ab`'s writer (app/ab/report.rs), and the
//! medians file beside the history.
//!
//! The report adapter: `strata ab`'s `compare` and `report` read an `AbRun`; the pane's one
//! run becomes one (one round, one prompt, no NLL; `host` is built here because the runner's
//! is private to it).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use strata::tokenizer::Tokenizer;
use tokio::sync::mpsc;

use super::ab_medians::{self, Loaded as MediansLoaded};
use super::app::ab::AbRunState;
use super::app::{AbAction, App, Level};
use super::strings;
use crate::ab::compare;
use crate::ab::report;
use crate::ab::runner::{AbRun, ArmRun, BuildId, PromptRun};
use crate::client::{Backoff, ClientEvent, EngineClient, Spawn};
use crate::history::{self, HistoryStore};

/// What the arms' engines send the loop.
pub enum AbEvent {
    Client {
        run: u64,
        arm: usize,
        ev: ClientEvent,
    },
    Stderr {
        run: u64,
        arm: usize,
        line: String,
    },
}

pub struct AbEngines {
    clients: [Option<EngineClient>; 2],
    tx: mpsc::UnboundedSender<AbEvent>,
    /// The tokenizer of the model last compared, by its path.
    tokenizer: Option<(PathBuf, Tokenizer)>,
    /// The conversation whose medians are loaded.
    medians_for: Option<String>,
}

impl AbEngines {
    pub fn new(tx: mpsc::UnboundedSender<AbEvent>) -> AbEngines {
        AbEngines {
            clients: [None, None],
            tx,
            tokenizer: None,
            medians_for: None,
        }
    }

    fn spawn(
        &mut self,
        run: u64,
        arm: usize,
        flags: std::collections::BTreeMap<String, bool>,
        env: std::collections::BTreeMap<String, String>,
    ) -> Result<()> {
        self.shutdown(arm);
        let (ev_tx, mut ev_rx) = mpsc::unbounded_channel();
        let (err_tx, mut err_rx) = mpsc::unbounded_channel();
        let mut spawn = Spawn::current_exe(flags)?;
        spawn.env = env;
        spawn.stderr = Some(err_tx);
        // a cold kernel cache compiles for a minute; an arm's engine is not restarted (a death
        // ends that arm with its reason, as in `strata ab`)
        spawn.hang_timeout = Duration::from_secs(120);
        spawn.backoff = Backoff::new(Duration::from_millis(100), 0);
        self.clients[arm] = Some(EngineClient::start(spawn, ev_tx));
        let tx = self.tx.clone();
        tokio::spawn(async move {
            while let Some(ev) = ev_rx.recv().await {
                if tx.send(AbEvent::Client { run, arm, ev }).is_err() {
                    break;
                }
            }
        });
        let tx = self.tx.clone();
        tokio::spawn(async move {
            while let Some(line) = err_rx.recv().await {
                if tx.send(AbEvent::Stderr { run, arm, line }).is_err() {
                    break;
                }
            }
        });
        Ok(())
    }

    /// Shuts arm `arm`'s engine down in the background (the loop goes on drawing).
    fn shutdown(&mut self, arm: usize) {
        if let Some(c) = self.clients[arm].take() {
            tokio::spawn(async move { c.shutdown().await });
        }
    }

    /// Both engines down, waited for (the app is quitting).
    pub async fn shutdown_all(&mut self) {
        for c in self.clients.iter_mut().filter_map(Option::take) {
            c.shutdown().await;
        }
    }

    /// An event of an arm's engine: into the app, and what it asks for done.
    pub fn on_event(&mut self, ev: AbEvent, app: &mut App, history: &HistoryStore) {
        let acts = match ev {
            AbEvent::Client { run, arm, ev } => app.ab_client(run, arm, ev),
            AbEvent::Stderr { run, arm, line } => {
                app.ab_stderr(run, arm, &line);
                Vec::new()
            }
        };
        for a in acts {
            self.perform(a, app, history);
        }
    }

    pub fn perform(&mut self, a: super::app::Action, app: &mut App, history: &HistoryStore) {
        let super::app::Action::Ab(a) = a else {
            return;
        };
        match a {
            AbAction::Spawn {
                run,
                arm,
                flags,
                env,
            } => {
                if let Err(e) = self.spawn(run, arm, flags, env) {
                    let acts = app.ab_client(
                        run,
                        arm,
                        ClientEvent::Died {
                            reason: format!("{e:#}"),
                            in_flight: Vec::new(),
                        },
                    );
                    for a in acts {
                        self.perform(a, app, history);
                    }
                }
            }
            AbAction::Send { arm, req } => {
                if let Some(c) = &self.clients[arm] {
                    c.send(req);
                }
            }
            AbAction::Shutdown { arm } => self.shutdown(arm),
            AbAction::Finished => {
                let acts = match self.decoder(app) {
                    Ok(tok) => app.ab_finish(&|ids: &[u32]| tok.decode(ids, true)),
                    Err(e) => {
                        app.notify(Level::Warn, format!("{e:#}"));
                        app.ab_finish(&ids_as_text)
                    }
                };
                for a in acts {
                    self.perform(a, app, history);
                }
            }
            AbAction::Export => {
                let dir = exports_dir(history);
                let res = match (self.decoder(app), app.ab.run.as_ref()) {
                    (Ok(tok), Some(run)) => export(run, &dir, &|ids: &[u32]| tok.decode(ids, true)),
                    (Err(e), _) => Err(e),
                    (_, None) => Err(anyhow!("no A/B run")),
                };
                match res {
                    Ok((md, json)) => app.notify(
                        Level::Info,
                        strings::ab_exported(
                            &md.display().to_string(),
                            &json.display().to_string(),
                        ),
                    ),
                    Err(e) => {
                        app.notify(Level::Error, strings::ab_export_failed(&format!("{e:#}")))
                    }
                }
            }
            AbAction::SaveMedians => self.save_medians(app, history),
        }
    }

    /// The tokenizer of the A/B's model, read once per model (the GGUF's vocabulary only: no
    /// inference in the UI process).
    fn decoder(&mut self, app: &App) -> Result<&Tokenizer> {
        let model = app.ab_model().context("no A/B run")?.to_path_buf();
        if self.tokenizer.as_ref().map(|(p, _)| p) != Some(&model) {
            let tok = crate::cmd::common::tokenizer_of(&model)
                .with_context(|| format!("the tokenizer of {}", model.display()))?;
            self.tokenizer = Some((model, tok));
        }
        // just set or matched above
        self.tokenizer
            .as_ref()
            .map(|(_, t)| t)
            .context("no tokenizer")
    }

    /// Loads the medians of the conversation on screen when it changed (start, Ctrl+N, Ctrl+O):
    /// a bad file is moved aside and reported.
    pub fn follow_conversation(&mut self, app: &mut App, history: &HistoryStore) {
        if self.medians_for.as_deref() == Some(app.conversation_id.as_str()) {
            return;
        }
        // the previous conversation's windows first
        if app.ab.medians_dirty {
            self.save_medians(app, history);
        }
        let id = app.conversation_id.clone();
        self.medians_for = Some(id.clone());
        let res = ab_medians::path(history.dir(), &id).and_then(|p| ab_medians::load(&p, &id));
        match res {
            Ok(MediansLoaded::Fresh(m)) | Ok(MediansLoaded::Read(m)) => app.ab_set_medians(m),
            Ok(MediansLoaded::Corrupt { fresh, aside, why }) => {
                app.ab_set_medians(fresh);
                app.notify(
                    Level::Error,
                    strings::ab_medians_bad(&aside.display().to_string(), &why),
                );
            }
            Err(e) => {
                app.ab_set_medians(ab_medians::Medians::new(&id));
                app.notify(Level::Error, strings::ab_medians_failed(&format!("{e:#}")));
            }
        }
    }

    /// Writes the medians when they changed.
    pub fn save_medians(&mut self, app: &mut App, history: &HistoryStore) {
        if !app.ab.medians_dirty {
            return;
        }
        let m = &app.ab.medians;
        match ab_medians::path(history.dir(), &m.conversation).and_then(|p| ab_medians::save(&p, m))
        {
            Ok(()) => app.ab.medians_dirty = false,
            Err(e) => app.notify(Level::Error, strings::ab_medians_failed(&format!("{e:#}"))),
        }
    }
}

/// Token ids as text when the tokenizer cannot be read: `[id][id]`.
fn ids_as_text(ids: &[u32]) -> String {
    ids.iter().map(|i| format!("[{i}]")).collect()
}

/// `<data dir>/exports`, where the conversation exports go too.
pub fn exports_dir(history: &HistoryStore) -> PathBuf {
    history
        .dir()
        .parent()
        .map_or_else(|| history.dir().join("exports"), |p| p.join("exports"))
}

fn host() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{cpu}, {cores} cores")
}

/// The pane's run as `strata ab`'s `AbRun`: one round, one prompt; Err when an arm has not
/// answered (no `loaded`, `turn` or `ids`).
pub fn to_ab_run(r: &AbRunState, build: BuildId, host: String) -> Result<AbRun> {
    let mut runs = Vec::new();
    for (i, a) in r.arms.iter().enumerate() {
        let missing = || anyhow!("arm {} has not answered", a.arm.name);
        let ids = a.ids.as_ref().ok_or_else(missing)?;
        runs.push(ArmRun {
            arm: i,
            rep: 0,
            pid: a.pid.unwrap_or(0),
            hello_flags: a.hello_flags.clone(),
            latch: a.latch.clone(),
            loaded: a.loaded.clone().ok_or_else(missing)?,
            devices: a.devices.clone(),
            prompts: vec![PromptRun {
                prompt: 0,
                text: a.text.clone(),
                prompt_ids: ids.prompt.clone(),
                reply_ids: ids.reply.clone(),
                windows: a.windows.clone(),
                turn: a.turn.clone().ok_or_else(missing)?,
            }],
        });
    }
    Ok(AbRun {
        spec: r.spec.clone(),
        build,
        started: r.started.clone(),
        host,
        // the end: when the last arm answered is not kept, so when the report is written
        load_avg: (r.load0, crate::ab::runner::load_avg()),
        runs,
        nll: vec![None; r.arms.len()],
        wall_s: r.started_at.elapsed().as_secs_f64(),
    })
}

/// Writes `ab-<stamp>.md` and `.json` into `dir` through `strata ab`'s report writer.
pub fn export(
    r: &AbRunState,
    dir: &Path,
    decode: &dyn Fn(&[u32]) -> String,
) -> Result<(PathBuf, PathBuf)> {
    let program = std::env::current_exe().context("the strata executable")?;
    let run = to_ab_run(r, BuildId::of(&program)?, host())?;
    let cmp = compare::compare(&run, decode);
    let command = format!(
        "strata (TUI A/B pane): {} vs {}",
        r.spec.arms[0].name, r.spec.arms[1].name
    );
    let md = report::markdown(&run, &cmp, &command);
    let json = serde_json::to_vec_pretty(&report::json(&run, &cmp, &command))?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let stamp = history::stamp(history::now_unix());
    let (mut md_path, mut json_path);
    let mut n = 0;
    loop {
        let tail = if n == 0 {
            String::new()
        } else {
            format!("-{n}")
        };
        md_path = dir.join(format!("ab-{stamp}{tail}.md"));
        json_path = dir.join(format!("ab-{stamp}{tail}.json"));
        if !md_path.exists() && !json_path.exists() {
            break;
        }
        n += 1;
    }
    history::write_atomic(&md_path, md.as_bytes())?;
    history::write_atomic(&json_path, &json)?;
    Ok((md_path, json_path))
}
