//! The engine-process client: runs `strata engine` as a child, speaks the JSON-lines protocol
//! (`docs/protocol.md`), notices when the engine dies or stops answering, and restarts it with
//! backoff. Everything the app learns arrives as [`ClientEvent`]s on one channel.
//!
//! It depends only on `strata::protocol`, tokio and tracing, so the integration tests include this
//! file as a module and drive it against the real binary.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use strata::protocol::{decode_event, Event, Load, Request};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

/// How to start the engine.
#[derive(Debug, Clone)]
pub struct Spawn {
    pub program: PathBuf,
    /// Arguments, normally `["engine"]`.
    pub args: Vec<String>,
    /// Kernel flags: `true` sets `NAME=1`, `false` removes `NAME` from the child's environment.
    pub flags: BTreeMap<String, bool>,
    /// Other engine variables set to these values (an A/B of the planner's switches, e.g.
    /// `STRATA_FUSED=0`); applied after `flags`.
    pub env: BTreeMap<String, String>,
    /// Every line the engine writes on stderr is also sent here (`strata ab` records the flag
    /// latch lines); None: stderr goes to the log only.
    pub stderr: Option<mpsc::UnboundedSender<String>>,
    /// Silence on stdout this long while a request is outstanding counts as a hang.
    pub hang_timeout: Duration,
    pub backoff: Backoff,
}

impl Spawn {
    /// `strata engine` from the running executable.
    pub fn current_exe(flags: BTreeMap<String, bool>) -> anyhow::Result<Spawn> {
        let program = std::env::current_exe().map_err(|e| {
            anyhow::anyhow!("cannot find the strata executable to run the engine: {e}")
        })?;
        Ok(Spawn {
            program,
            args: vec!["engine".into()],
            flags,
            env: BTreeMap::new(),
            stderr: None,
            hang_timeout: Duration::from_secs(30),
            backoff: Backoff::default(),
        })
    }
}

/// Exponential restart backoff with a cap on consecutive attempts, so a crashing engine is not
/// restarted in a loop: `base`, 2·`base`, 4·`base`, … for `max_attempts` attempts, then give up.
#[derive(Debug, Clone, PartialEq)]
pub struct Backoff {
    pub base: Duration,
    pub max_attempts: u32,
    attempt: u32,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new(Duration::from_millis(500), 6)
    }
}

impl Backoff {
    pub fn new(base: Duration, max_attempts: u32) -> Backoff {
        Backoff {
            base,
            max_attempts,
            attempt: 0,
        }
    }

    /// The delay before the next restart attempt, or None once the attempts are used up.
    pub fn next_delay(&mut self) -> Option<Duration> {
        if self.attempt >= self.max_attempts {
            return None;
        }
        let d = self.base.saturating_mul(1u32 << self.attempt.min(16));
        self.attempt += 1;
        Some(d)
    }

    /// Attempts made since the last success.
    pub fn attempts(&self) -> u32 {
        self.attempt
    }

    /// The engine is healthy again (it answered `loaded`): forget the failure streak.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

/// What the client tells the app.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientEvent {
    /// A new engine process is running.
    Spawned { pid: u32 },
    /// A protocol event from the engine.
    Engine(Event),
    /// The engine died or was killed for hanging. `in_flight` are the `generate` ids that will
    /// never get their `turn`.
    Died { reason: String, in_flight: Vec<u64> },
    /// A restart after a death is scheduled.
    Restarting { attempt: u32, delay: Duration },
    /// Too many consecutive failures: no more automatic restarts.
    GaveUp { attempts: u32 },
    /// A deliberate restart (new flags) finished: time from the restart request to `loaded`.
    /// Restarts asked for while one is under way are coalesced (see [`EngineClient::restart`]):
    /// the time is that of the last restart, the one that brought up the engine now running.
    Restarted { ms: f64 },
    /// A request could not be sent because no engine is running.
    Dropped(Request),
    /// A stdout line that is not a protocol event (logged, skipped).
    BadLine(String),
}

enum Cmd {
    Send(Request),
    Restart(BTreeMap<String, bool>, Option<Load>),
    RetryNow,
    Shutdown(tokio::sync::oneshot::Sender<()>),
}

/// Handle to the supervisor task. Cheap to clone.
#[derive(Clone)]
pub struct EngineClient {
    cmd: mpsc::UnboundedSender<Cmd>,
}

impl EngineClient {
    /// Spawns the engine and its supervisor task on the current tokio runtime.
    pub fn start(spawn: Spawn, events: mpsc::UnboundedSender<ClientEvent>) -> EngineClient {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(supervise(spawn, rx, events));
        EngineClient { cmd: tx }
    }

    pub fn send(&self, req: Request) {
        // A closed channel means the supervisor is gone (shutdown): nothing left to tell.
        let _ = self.cmd.send(Cmd::Send(req));
    }

    /// Restart the engine with these kernel flags, then load `load` (None: the last model).
    ///
    /// Restarts coalesce: while one is under way (until its engine reports `loaded`, fails the
    /// load or dies) a new request only replaces the one waiting, so ten quick toggle flips run
    /// at most two restarts: the one under way, then one with the last flags asked for, or none
    /// if those are the flags the engine under way runs with. Events of an engine that a
    /// waiting restart will replace are held back (its `hello`, `loaded`, a failed load), so the
    /// app never sees flags or a `loaded` that are already stale.
    pub fn restart(&self, flags: BTreeMap<String, bool>, load: Option<Load>) {
        let _ = self.cmd.send(Cmd::Restart(flags, load));
    }

    /// Restart now: start the engine after the client gave up (or skip the backoff wait), or
    /// restart a running one with its flags and the last load (e.g. after that load failed).
    pub fn retry_now(&self) {
        let _ = self.cmd.send(Cmd::RetryNow);
    }

    /// Ask the engine to exit (kill it after 3 s) and stop the supervisor.
    pub async fn shutdown(&self) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if self.cmd.send(Cmd::Shutdown(tx)).is_ok() {
            let _ = rx.await;
        }
    }
}

struct Running {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::UnboundedReceiver<String>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    last_heard: Instant,
}

/// Requests awaiting an answer, for hang detection and for reporting lost generations.
#[derive(Default)]
struct Outstanding {
    loading: bool,
    stats: bool,
    generating: BTreeSet<u64>,
}

impl Outstanding {
    fn any(&self) -> bool {
        self.loading || self.stats || !self.generating.is_empty()
    }

    fn on_request(&mut self, r: &Request) {
        match r {
            Request::Load(_) => self.loading = true,
            Request::Stats {} => self.stats = true,
            Request::Generate(g) => {
                self.generating.insert(g.id);
            }
            // a count is answered by the worker between generations (no hang watch of its own)
            Request::Cancel { .. }
            | Request::Shutdown {}
            | Request::Count(_)
            | Request::Ids { .. } => {}
        }
    }

    fn on_event(&mut self, e: &Event) {
        match e {
            Event::Loaded(_) => self.loading = false,
            Event::Devices(_) => self.stats = false,
            Event::Turn(t) => {
                self.generating.remove(&t.id);
            }
            Event::Error(err) if err.id.is_none() => self.loading = false,
            _ => {}
        }
    }
}

struct Supervisor {
    spawn: Spawn,
    events: mpsc::UnboundedSender<ClientEvent>,
    running: Option<Running>,
    out: Outstanding,
    last_load: Option<Load>,
    retry_at: Option<tokio::time::Instant>,
    /// A deliberate restart under way: set when it begins, cleared when its engine reports
    /// `loaded` (then reported, if timed), fails its load, or dies.
    restart: Option<UnderWay>,
    /// The latest restart asked for while one was under way: run when that one ends.
    deferred: Option<(BTreeMap<String, bool>, Option<Load>)>,
    /// The `hello` of the engine under way, held back while a deferred restart will replace it.
    held_hello: Option<Event>,
}

struct UnderWay {
    t0: Instant,
    /// Reported as [`ClientEvent::Restarted`] (flag restarts; not a Ctrl+L retry).
    timed: bool,
}

async fn supervise(
    spawn: Spawn,
    mut cmds: mpsc::UnboundedReceiver<Cmd>,
    events: mpsc::UnboundedSender<ClientEvent>,
) {
    let mut s = Supervisor {
        spawn,
        events,
        running: None,
        out: Outstanding::default(),
        last_load: None,
        retry_at: None,
        restart: None,
        deferred: None,
        held_hello: None,
    };
    s.start_process().await;
    let mut hang_check = tokio::time::interval(Duration::from_millis(500));
    loop {
        let retry_at = s.retry_at;
        tokio::select! {
            cmd = cmds.recv() => match cmd {
                Some(Cmd::Send(r)) => s.send(r).await,
                Some(Cmd::Restart(flags, load)) => {
                    if s.restart.is_some() && s.running.is_some() {
                        // the restart under way finishes first; only the latest request waits
                        let earlier = s.deferred.take().and_then(|(_, l)| l);
                        tracing::info!(?flags, "restart requested during a restart: deferred");
                        s.deferred = Some((flags, load.or(earlier)));
                    } else {
                        s.restart_now(flags, load, true).await;
                    }
                }
                Some(Cmd::RetryNow) => {
                    if s.running.is_some() {
                        // e.g. its load failed: the engine is up but has nothing loaded
                        let (flags, load) = s
                            .deferred
                            .take()
                            .unwrap_or_else(|| (s.spawn.flags.clone(), None));
                        s.restart_now(flags, load, false).await;
                    } else {
                        s.spawn.backoff.reset();
                        s.retry_at = None;
                        s.start_process().await;
                    }
                }
                Some(Cmd::Shutdown(done)) => {
                    s.stop_process().await;
                    let _ = done.send(());
                    return;
                }
                None => {
                    s.stop_process().await;
                    return;
                }
            },
            line = next_line(&mut s.running) => match line {
                Some(l) => s.on_line(l).await,
                None => s.died(None).await,
            },
            _ = sleep_until_opt(retry_at) => {
                s.retry_at = None;
                s.start_process().await;
            }
            _ = hang_check.tick() => {
                let hung = s.running.as_ref().is_some_and(|r| r.last_heard.elapsed() > s.spawn.hang_timeout);
                if hung && s.out.any() {
                    let secs = s.spawn.hang_timeout.as_secs_f64();
                    s.died(Some(format!("the engine did not answer for {secs:.0} s and was killed"))).await;
                }
            }
        }
    }
}

async fn next_line(running: &mut Option<Running>) -> Option<String> {
    match running {
        Some(r) => r.lines.recv().await,
        None => std::future::pending().await,
    }
}

async fn sleep_until_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

impl Supervisor {
    fn emit(&self, e: ClientEvent) {
        // The app dropped its receiver: it is exiting, nobody to tell.
        let _ = self.events.send(e);
    }

    async fn start_process(&mut self) {
        match spawn_child(&self.spawn) {
            Ok(r) => {
                let pid = r.child.id().unwrap_or(0);
                tracing::info!(pid, flags = ?self.spawn.flags, "engine started");
                self.running = Some(r);
                self.out = Outstanding::default();
                self.emit(ClientEvent::Spawned { pid });
                if let Some(load) = self.last_load.clone() {
                    self.send(Request::Load(load)).await;
                }
            }
            Err(e) => {
                tracing::error!("cannot start the engine: {e:#}");
                self.restart = None;
                self.deferred = None;
                self.schedule_restart(format!("cannot start the engine: {e:#}"), Vec::new());
            }
        }
    }

    /// Stop the engine (if any), start one with `flags`, load `load` or the last model.
    async fn restart_now(
        &mut self,
        flags: BTreeMap<String, bool>,
        load: Option<Load>,
        timed: bool,
    ) {
        self.deferred = None;
        self.held_hello = None;
        self.restart = Some(UnderWay {
            t0: Instant::now(),
            timed,
        });
        self.stop_process().await;
        if load.is_some() {
            self.last_load = load;
        }
        self.spawn.flags = flags;
        self.spawn.backoff.reset();
        self.start_process().await;
    }

    /// The restart under way ended (`loaded`, a failed load, a death): run the deferred one,
    /// unless it asks for the flags the engine runs with (the flips came back: a model it names
    /// is sent as a load). True if a restart began, so the ended one's news is stale.
    async fn run_deferred(&mut self) -> bool {
        let Some((flags, load)) = self.deferred.take() else {
            return false;
        };
        if flags != self.spawn.flags {
            self.restart_now(flags, load, true).await;
            return true;
        }
        tracing::info!("deferred restart cancelled: its flags are the running engine's");
        if let Some(h) = self.held_hello.take() {
            self.emit(ClientEvent::Engine(h));
        }
        if let Some(l) = load.filter(|l| Some(l) != self.last_load.as_ref()) {
            self.send(Request::Load(l)).await;
        }
        false
    }

    async fn send(&mut self, req: Request) {
        if let Request::Load(l) = &req {
            self.last_load = Some(l.clone());
            if let Some((_, load)) = self.deferred.as_mut() {
                // the engine that will take it is the deferred restart's
                *load = Some(l.clone());
                return;
            }
        }
        let Some(r) = self.running.as_mut() else {
            self.emit(ClientEvent::Dropped(req));
            return;
        };
        if !self.out.any() {
            // Silence before this request was not owed; start the hang clock now.
            r.last_heard = Instant::now();
        }
        self.out.on_request(&req);
        let line = req.to_line();
        let res = async {
            r.stdin.write_all(line.as_bytes()).await?;
            r.stdin.flush().await
        }
        .await;
        if let Err(e) = res {
            tracing::warn!("writing to the engine failed: {e}");
            // The read side will see EOF and report the death; keep nothing half-sent.
        }
    }

    async fn on_line(&mut self, line: String) {
        if let Some(r) = self.running.as_mut() {
            r.last_heard = Instant::now();
        }
        match decode_event(&line) {
            Ok(ev) => {
                self.out.on_event(&ev);
                match &ev {
                    Event::Hello(_) if self.restart.is_some() && self.deferred.is_some() => {
                        self.held_hello = Some(ev);
                        return;
                    }
                    Event::Loaded(_) => {
                        self.spawn.backoff.reset();
                        if let Some(r) = self.restart.take() {
                            if self.run_deferred().await {
                                return;
                            }
                            self.emit(ClientEvent::Engine(ev));
                            if r.timed {
                                self.emit(ClientEvent::Restarted {
                                    ms: r.t0.elapsed().as_secs_f64() * 1e3,
                                });
                            }
                            return;
                        }
                    }
                    Event::Error(e) if e.id.is_none() && self.restart.is_some() => {
                        // the load of the restart under way failed: that restart has ended
                        self.restart = None;
                        if self.run_deferred().await {
                            tracing::warn!("stale engine's load failed: {}", e.message);
                            return;
                        }
                    }
                    _ => {}
                }
                self.emit(ClientEvent::Engine(ev));
            }
            Err(e) => {
                tracing::warn!("{e}");
                self.emit(ClientEvent::BadLine(line));
            }
        }
    }

    /// The process is gone (stdout EOF) or hung (`reason` given): reap it and schedule a restart.
    async fn died(&mut self, hung: Option<String>) {
        let Some(mut r) = self.running.take() else {
            return;
        };
        if hung.is_some() {
            let _ = r.child.start_kill();
        }
        let status = match tokio::time::timeout(Duration::from_secs(3), r.child.wait()).await {
            Ok(Ok(st)) => st.to_string(),
            Ok(Err(e)) => format!("wait failed: {e}"),
            Err(_) => {
                let _ = r.child.start_kill();
                let _ = r.child.wait().await;
                "closed its output and was killed".to_string()
            }
        };
        let tail = last_stderr_line(&r.stderr_tail);
        let mut reason = hung.unwrap_or_else(|| format!("the engine exited ({status})"));
        if let Some(t) = tail {
            reason.push_str(": ");
            reason.push_str(&t);
        }
        tracing::error!("{reason}");
        let in_flight: Vec<u64> = std::mem::take(&mut self.out.generating)
            .into_iter()
            .collect();
        self.out = Outstanding::default();
        self.restart = None;
        self.held_hello = None;
        if let Some((flags, load)) = self.deferred.take() {
            if in_flight.is_empty() && flags != self.spawn.flags {
                // a newer restart was waiting for this engine to finish anyway: no backoff
                tracing::info!("the engine a deferred restart replaces died; restarting now");
                self.restart_now(flags, load, true).await;
                return;
            }
            // the respawn after the backoff brings up what was asked for last
            self.spawn.flags = flags;
            if load.is_some() {
                self.last_load = load;
            }
        }
        self.schedule_restart(reason, in_flight);
    }

    fn schedule_restart(&mut self, reason: String, in_flight: Vec<u64>) {
        self.emit(ClientEvent::Died { reason, in_flight });
        match self.spawn.backoff.next_delay() {
            Some(delay) => {
                self.retry_at = Some(tokio::time::Instant::now() + delay);
                self.emit(ClientEvent::Restarting {
                    attempt: self.spawn.backoff.attempts(),
                    delay,
                });
            }
            None => {
                self.retry_at = None;
                self.emit(ClientEvent::GaveUp {
                    attempts: self.spawn.backoff.attempts(),
                });
            }
        }
    }

    /// Polite stop: `shutdown`, 3 s grace, then kill.
    async fn stop_process(&mut self) {
        self.retry_at = None;
        let Some(mut r) = self.running.take() else {
            return;
        };
        let _ = r
            .stdin
            .write_all(Request::Shutdown {}.to_line().as_bytes())
            .await;
        let _ = r.stdin.flush().await;
        drop(r.stdin);
        if tokio::time::timeout(Duration::from_secs(3), r.child.wait())
            .await
            .is_err()
        {
            tracing::warn!("the engine ignored shutdown for 3 s; killing it");
            let _ = r.child.start_kill();
            let _ = r.child.wait().await;
        }
        self.out = Outstanding::default();
    }
}

fn last_stderr_line(tail: &Arc<Mutex<VecDeque<String>>>) -> Option<String> {
    // A poisoned lock only means a logging task panicked mid-push; the lines are still usable.
    let t = tail.lock().unwrap_or_else(|p| p.into_inner());
    t.iter().rev().find(|l| !l.trim().is_empty()).cloned()
}

fn spawn_child(spawn: &Spawn) -> anyhow::Result<Running> {
    let mut cmd = Command::new(&spawn.program);
    cmd.args(&spawn.args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (name, on) in &spawn.flags {
        if *on {
            cmd.env(name, "1");
        } else {
            cmd.env_remove(name);
        }
    }
    for (name, value) in &spawn.env {
        cmd.env(name, value);
    }
    let mut child = cmd.spawn().map_err(|e| {
        anyhow::anyhow!("{} {}: {e}", spawn.program.display(), spawn.args.join(" "))
    })?;
    // All three were requested as pipes just above, so they are present.
    let stdin = child.stdin.take().expect("stdin piped");
    let stdout = child.stdout.take().expect("stdout piped");
    let stderr = child.stderr.take().expect("stderr piped");

    let (tx, lines) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut rd = BufReader::new(stdout).lines();
        while let Ok(Some(line)) = rd.next_line().await {
            if line.trim().is_empty() {
                continue;
            }
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
    let tail = stderr_tail.clone();
    let copy = spawn.stderr.clone();
    tokio::spawn(async move {
        let mut rd = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = rd.next_line().await {
            tracing::info!(target: "engine", "{line}");
            if let Some(c) = &copy {
                // a receiver that is gone no longer wants the lines; the log still gets them
                let _ = c.send(line.clone());
            }
            let mut t = tail.lock().unwrap_or_else(|p| p.into_inner());
            if t.len() == 20 {
                t.pop_front();
            }
            t.push_back(line);
        }
    });
    Ok(Running {
        child,
        stdin,
        lines,
        stderr_tail,
        last_heard: Instant::now(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_then_gives_up_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(500), 6);
        let got: Vec<u64> = std::iter::from_fn(|| b.next_delay())
            .map(|d| d.as_millis() as u64)
            .collect();
        assert_eq!(got, vec![500, 1000, 2000, 4000, 8000, 16000]);
        assert_eq!(b.next_delay(), None, "no seventh attempt: no restart loop");
        assert_eq!(b.attempts(), 6);
        b.reset();
        assert_eq!(b.next_delay(), Some(Duration::from_millis(500)));
    }

    #[test]
    fn outstanding_tracks_requests_until_answered() {
        use strata::protocol::*;
        let mut o = Outstanding::default();
        assert!(!o.any());
        o.on_request(&Request::Generate(Generate {
            id: 3,
            messages: vec![],
            sampling: Sampling::default(),
            spec: None,
            parse_special: false,
        }));
        o.on_request(&Request::Stats {});
        assert!(o.any());
        o.on_event(&Event::Devices(Devices { cards: vec![] }));
        assert!(o.any(), "generation 3 still owes a turn");
        let turn: Event = decode_event(
            r#"{"type":"turn","id":3,"prefill_tokens":1,"prefill_ms":1,"prefill_tps":1,"decode_tokens":1,"decode_ms":1,"decode_tps":1,"windows":1,"tokens_per_window":1,"proposed":0,"accepted":0,"acceptance":0,"mean_accepted_len":0,"ttft_ms":1,"stop":"eos"}"#,
        )
        .unwrap();
        o.on_event(&turn);
        assert!(!o.any());
    }
}
