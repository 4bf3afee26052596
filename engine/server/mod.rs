//! The engine process (`strata engine`): JSON-line requests on stdin, events on stdout, exactly as
//! docs/protocol.md says. The calling thread reads requests; a worker thread owns the model and
//! runs loads and generations, so `cancel` and `stats` are answered while a generation runs.
//! Nothing but events goes to stdout; diagnostics go to stderr.

pub mod decode;
mod exit;
pub mod flags;
mod hostmem;
mod input;
pub mod out;
pub mod session;

use crate::protocol::{
    decode_request, Devices, EngineError, Event, Hello, Ids, Request, Sampling, PROTOCOL_VERSION,
};
use decode::{failed_turn, GenJob};
pub use out::Out;
use session::Session;
use std::io::BufRead;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Instant;

enum Job {
    Load(crate::protocol::Load),
    Generate(GenJob),
    Count(crate::protocol::Count),
    /// `ids`: the last finished generation's token ids.
    Ids(u64),
}

/// State both threads see.
struct Shared {
    /// What `stats` answers with: the memory use changes only at load time.
    devices: Mutex<Devices>,
    /// The generation the worker owns (queued or running) and its cancel flag.
    current: Mutex<Option<(u64, Arc<AtomicBool>)>>,
    /// Set on `shutdown`/EOF: a load stops at its next stage, queued loads do not start.
    quit: AtomicBool,
    /// The worker is in a load (exit.rs leaves without it rather than wait).
    loading: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned lock only means a thread panicked while holding it; the data are plain values.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn error(out: &Out, id: Option<u64>, message: String, fatal: bool) {
    eprintln!("strata engine: error: {message}");
    out.emit(&Event::Error(EngineError { id, message, fatal }));
}

/// Serves requests from `input` until `shutdown` or EOF; returns the process exit status.
pub fn serve(input: impl BufRead, out: Out) -> i32 {
    let flags = flags::latched().clone();
    out.emit(&Event::Hello(Hello {
        version: PROTOCOL_VERSION,
        pid: std::process::id(),
        flags,
    }));
    let shared = Arc::new(Shared {
        devices: Mutex::new(Devices { cards: Vec::new() }),
        current: Mutex::new(None),
        quit: AtomicBool::new(false),
        loading: AtomicBool::new(false),
    });
    let (tx, rx) = mpsc::channel::<Job>();
    let worker = {
        let (out, shared) = (out.clone(), shared.clone());
        std::thread::Builder::new()
            .name("engine-worker".into())
            .spawn(move || worker(rx, out, shared))
    };
    let worker = match worker {
        Ok(w) => w,
        Err(e) => {
            error(
                &out,
                None,
                format!("cannot start the worker thread: {e}"),
                true,
            );
            return 1;
        }
    };
    // Defaults a `generate` takes for the sampling fields it omits: the last load's.
    let mut defaults = Sampling::default();
    for line in input::Lines::new(input) {
        let line = match line {
            Ok(input::Line::Text(l)) => l,
            Ok(input::Line::NotUtf8 {
                number,
                bad_at,
                len,
            }) => {
                error(
                    &out,
                    None,
                    input::Line::describe_bad(number, bad_at, len),
                    false,
                );
                continue;
            }
            Err(e) => {
                // stdin itself failed: nothing more can arrive, so this ends the engine
                error(&out, None, format!("reading stdin: {e}"), true);
                break;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let received = Instant::now();
        let req = match parse(&line, &defaults) {
            Ok(r) => r,
            Err((id, message)) => {
                error(&out, id, message, false);
                if let Some(id) = id {
                    out.emit(&Event::Turn(failed_turn(id)));
                }
                continue;
            }
        };
        match req {
            Request::Load(l) => {
                defaults = l.sampling.clone();
                cancel_current(&shared);
                if tx.send(Job::Load(l)).is_err() {
                    break;
                }
            }
            Request::Generate(g) => {
                let mut cur = lock(&shared.current);
                if let Some((busy, _)) = cur.as_ref() {
                    let busy = *busy;
                    drop(cur);
                    error(
                        &out,
                        Some(g.id),
                        format!("generate {}: generation {busy} is still running", g.id),
                        false,
                    );
                    out.emit(&Event::Turn(failed_turn(g.id)));
                    continue;
                }
                let cancel = Arc::new(AtomicBool::new(false));
                *cur = Some((g.id, cancel.clone()));
                drop(cur);
                let job = GenJob {
                    req: g,
                    received,
                    cancel,
                };
                if tx.send(Job::Generate(job)).is_err() {
                    break;
                }
            }
            Request::Cancel { id } => {
                if let Some((cur, flag)) = lock(&shared.current).as_ref() {
                    if *cur == id {
                        flag.store(true, Ordering::Relaxed);
                    }
                }
            }
            Request::Stats {} => {
                let d = hostmem::refreshed(lock(&shared.devices).clone());
                out.emit(&Event::Devices(d));
            }
            Request::Count(c) => {
                if tx.send(Job::Count(c)).is_err() {
                    break;
                }
            }
            Request::Ids { id } => {
                if tx.send(Job::Ids(id)).is_err() {
                    break;
                }
            }
            Request::Shutdown {} => break,
        }
    }
    shared.quit.store(true, Ordering::Relaxed);
    cancel_current(&shared);
    drop(tx);
    exit::join_or_leave(worker, &shared.loading, &out)
}

fn cancel_current(shared: &Shared) {
    if let Some((_, flag)) = lock(&shared.current).as_ref() {
        flag.store(true, Ordering::Relaxed);
    }
}

/// One request line -> a request, with a `generate`'s missing sampling fields taken from the last
/// load. The error carries the `generate` id when the line names one, so that turn can be ended.
fn parse(line: &str, defaults: &Sampling) -> Result<Request, (Option<u64>, String)> {
    let mut v: serde_json::Value = serde_json::from_str(line).map_err(|e| {
        let shown: String = line.chars().take(200).collect();
        (None, format!("bad request line (not JSON: {e}): {shown}"))
    })?;
    let gen_id = match v.get("type").and_then(|t| t.as_str()) {
        Some("generate") => v.get("id").and_then(|i| i.as_u64()),
        _ => None,
    };
    if let (Some(_), Some(obj)) = (gen_id, v.as_object_mut()) {
        let sampling = obj
            .entry("sampling")
            .or_insert_with(|| serde_json::json!({}));
        // serde_json::to_value of a plain struct cannot fail.
        if let (Some(s), Ok(serde_json::Value::Object(d))) =
            (sampling.as_object_mut(), serde_json::to_value(defaults))
        {
            for (k, val) in d {
                s.entry(k).or_insert(val);
            }
        }
    }
    let kind = v.get("type").and_then(|t| t.as_str()).unwrap_or("?");
    match decode_request(&v.to_string()) {
        Ok(r) => {
            check_sampling(&r).map_err(|e| (gen_id, format!("bad request ({kind}, {e}")))?;
            Ok(r)
        }
        Err(e) => {
            let field = match bad_field(&v, &[]) {
                Some(f) => format!(", field \"{f}\""),
                None => String::new(),
            };
            Err((gen_id, format!("bad request ({kind}{field}): {}", e.source)))
        }
    }
}

/// A `load`'s or `generate`'s sampling against the allowed ranges (`SamplingParams::validate`,
/// the one rule for both): refused before the request is queued, so a bad `load` leaves the
/// loaded model in place. The error goes on from "bad request (TYPE, ".
fn check_sampling(r: &Request) -> Result<(), String> {
    let s = match r {
        Request::Load(l) => &l.sampling,
        Request::Generate(g) => &g.sampling,
        _ => return Ok(()),
    };
    decode::sampling_params(s).validate().map_err(|e| match &e {
        crate::sampling::SampleError::BadParam { name, .. } => {
            format!("field \"sampling.{name}\"): {e}")
        }
        _ => format!("sampling): {e}"),
    })
}

/// The field that makes `v` fail to decode, as a dotted path ("sampling.top_k"): serde's message
/// names the bad value and the type it wanted but not the key (an internally tagged enum reports
/// every error at the end of the object). A field is the culprit when the request decodes, or
/// only misses that field, once it is taken out; an object-valued culprit is searched one level
/// down. None when no single field explains it. A handful of re-parses, on an error path only.
fn bad_field(v: &serde_json::Value, path: &[&str]) -> Option<String> {
    let here = path.iter().try_fold(v, |o, k| o.get(k))?.as_object()?;
    // (the top level's "type" picks the request: taking it out explains nothing)
    for k in here.keys().filter(|k| !(path.is_empty() && *k == "type")) {
        let mut w = v.clone();
        let mut o = &mut w;
        for p in path {
            o = o.get_mut(p)?;
        }
        o.as_object_mut()?.remove(k);
        let explained = match decode_request(&w.to_string()) {
            Ok(_) => true,
            Err(e) => e
                .source
                .to_string()
                .contains(&format!("missing field `{k}`")),
        };
        if explained {
            let mut deeper: Vec<&str> = path.to_vec();
            deeper.push(k);
            return Some(bad_field(v, &deeper).unwrap_or_else(|| deeper.join(".")));
        }
    }
    None
}

fn worker(rx: mpsc::Receiver<Job>, out: Out, shared: Arc<Shared>) {
    *lock(&shared.devices) = session::idle_devices();
    let mut session: Option<Session> = None;
    // the last finished generation's token ids, for `ids`
    let mut last_ids: Option<Ids> = None;
    while let Ok(job) = rx.recv() {
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_job(job, &mut session, &mut last_ids, &out, &shared)
        }));
        if res.is_err() {
            // The model's state is unknown after a panic: end the process so the app restarts a
            // clean one (the panic message is already on stderr).
            error(
                &out,
                None,
                "internal error (panic); see the engine log".into(),
                true,
            );
            std::process::exit(101);
        }
    }
}

fn run_job(
    job: Job,
    session: &mut Option<Session>,
    last_ids: &mut Option<Ids>,
    out: &Out,
    shared: &Shared,
) {
    {
        match job {
            Job::Load(l) => {
                if shared.quit.load(Ordering::Relaxed) {
                    return;
                }
                shared.loading.store(true, Ordering::Relaxed);
                // Free the old model's device memory before allocating the new one.
                *session = None;
                *lock(&shared.devices) = session::idle_devices();
                let loaded = Session::load(&l, out, &shared.quit);
                shared.loading.store(false, Ordering::Relaxed);
                match loaded {
                    Ok(s) => {
                        eprintln!(
                            "strata engine: loaded {} in {:.0} ms",
                            s.loaded.model, s.loaded.load_ms
                        );
                        out.emit(&Event::Loaded(s.loaded.clone()));
                        let d = s.devices();
                        *lock(&shared.devices) = d.clone();
                        out.emit(&Event::Devices(d));
                        *session = Some(s);
                    }
                    // shutting down: the app asked for it, no error to report
                    Err(session::LoadError::Cancelled) => {}
                    Err(e) => error(out, None, e.to_string(), false),
                }
            }
            Job::Count(c) => decode::count(session.as_ref(), &c, out),
            Job::Ids(id) => match last_ids.as_ref().filter(|i| i.id == id) {
                Some(i) => out.emit(&Event::Ids(i.clone())),
                None => error(
                    out,
                    Some(id),
                    format!("ids {id}: not the last finished generation"),
                    false,
                ),
            },
            Job::Generate(job) => {
                let id = job.req.id;
                *last_ids = None;
                let turn = match session.as_mut() {
                    Some(s) => {
                        let (turn, ids) = decode::generate(s, &job, out);
                        *last_ids = ids;
                        turn
                    }
                    None => {
                        error(
                            out,
                            Some(id),
                            format!("generate {id}: no model is loaded (send load first)"),
                            false,
                        );
                        failed_turn(id)
                    }
                };
                // Free the slot before the turn goes out: the app may answer it with a new
                // generate at once.
                *lock(&shared.current) = None;
                out.emit(&Event::Turn(turn));
                let d = hostmem::refreshed(lock(&shared.devices).clone());
                out.emit(&Event::Devices(d));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_field_is_named() {
        let d = Sampling::default();
        for (line, kind, field) in [
            (r#"{"type":"generate","id":"x"}"#, "generate", "id"),
            (r#"{"type":"cancel","id":-1}"#, "cancel", "id"),
            (
                r#"{"type":"generate","id":3,"messages":[],"sampling":{"top_k":"many"}}"#,
                "generate",
                "sampling.top_k",
            ),
            (r#"{"type":"load","model":7}"#, "load", "model"),
        ] {
            let (_, msg) = parse(line, &d).expect_err(line);
            println!("{line} -> {msg}");
            assert!(
                msg.starts_with(&format!("bad request ({kind}, field \"{field}\"): ")),
                "{msg}"
            );
        }
        // a generate with a readable id keeps it, so its turn can be ended
        let (id, _) = parse(r#"{"type":"generate","id":4,"messages":5}"#, &d).unwrap_err();
        assert_eq!(id, Some(4));
    }

    #[test]
    fn generate_takes_missing_sampling_fields_from_the_load() {
        let load = Sampling {
            temperature: 0.0,
            top_k: 5,
            seed: Some(9),
            max_tokens: 33,
            ..Sampling::default()
        };
        let r = parse(
            r#"{"type":"generate","id":4,"messages":[],"sampling":{"max_tokens":7}}"#,
            &load,
        );
        let Ok(Request::Generate(g)) = r else {
            panic!("not a generate: {r:?}")
        };
        assert_eq!(g.sampling.max_tokens, 7, "the request's own value wins");
        assert_eq!(
            (g.sampling.temperature, g.sampling.top_k, g.sampling.seed),
            (0.0, 5, Some(9))
        );
        let Ok(Request::Generate(g)) = parse(r#"{"type":"generate","id":5,"messages":[]}"#, &load)
        else {
            panic!("generate without a sampling object")
        };
        assert_eq!(g.sampling, load);
    }

    #[test]
    fn bad_lines_name_the_problem_and_the_generate_id_when_readable() {
        let d = Sampling::default();
        let (id, msg) = parse("{oops", &d).unwrap_err();
        assert_eq!(id, None);
        assert!(msg.contains("not JSON") && msg.contains("{oops"), "{msg}");
        let (id, msg) = parse(r#"{"type":"generate","id":3,"messages":5}"#, &d).unwrap_err();
        assert_eq!(id, Some(3));
        assert!(
            msg.contains("messages") || msg.contains("sequence"),
            "{msg}"
        );
        let (id, msg) = parse(r#"{"type":"warp","id":3}"#, &d).unwrap_err();
        assert_eq!(id, None);
        assert!(msg.contains("warp"), "{msg}");
    }
}
