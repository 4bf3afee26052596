//! The A/B pane (issue 29): its state driven by key presses and the arms' engine events, its
//! screen (insta), the report through `strata ab`'s writer, and the medians per flag set.
//! Built as `tests.rs` builds the main screen, with its helpers.

use ratatui::crossterm::event::KeyCode;
use strata::protocol::*;

use super::ab_engines::{export, to_ab_run};
use super::app::ab::{plan, Mode, Phase, AB_CTX};
use super::app::{AbAction, Action, App, Overlay};
use super::tests::*;
use crate::ab::compare::{self, Identity};
use crate::ab::runner::BuildId;
use crate::ab::spec::{Arm, RunSpec};
use crate::client::ClientEvent;

const MIB: u64 = 1 << 20;
/// Token pieces of the test vocabulary: id = index.
const VOCAB: &[&str] = &[
    "The",
    " sky",
    " is",
    " blue",
    " because",
    " of",
    " Rayleigh",
    " scattering",
    ".",
    " light",
    " air",
    "\n",
];
const BASE: &[u32] = &[0, 1, 2, 3, 4, 5, 6, 7, 8];
const OTHER: &[u32] = &[0, 1, 2, 3, 4, 9, 10, 8];

fn decode(ids: &[u32]) -> String {
    ids.iter().map(|&i| VOCAB[i as usize]).collect()
}

fn arm(name: &str) -> Arm {
    Arm::parse(name, &Default::default()).unwrap()
}

fn spec(a: &str, b: &str) -> RunSpec {
    RunSpec {
        model: SMOL.into(),
        prompts: vec!["Why is the sky blue?".into()],
        system: String::new(),
        n: 16,
        spec: 0,
        ctx: AB_CTX,
        split_cpu: None,
        sampling: Sampling {
            seed: Some(42),
            max_tokens: 16,
            ..Sampling::default()
        },
        reps: 1,
        arms: vec![arm(a), arm(b)],
        nll: None,
    }
}

fn run_id(app: &App) -> u64 {
    app.ab.run.as_ref().unwrap().run
}

fn ev(app: &mut App, arm: usize, e: Event) -> Vec<Action> {
    let run = run_id(app);
    app.ab_client(run, arm, ClientEvent::Engine(e))
}

/// Arm `arm`'s engine from hello to its `devices`: the reply `ids` streamed token by token,
/// one window of `ms` each. Returns the actions of the last event.
fn answer(app: &mut App, arm: usize, pid: u32, on: &[&str], ids: &[u32], ms: f64) -> Vec<Action> {
    let run = run_id(app);
    app.ab_client(run, arm, ClientEvent::Spawned { pid });
    ev(
        app,
        arm,
        Event::Hello(Hello {
            version: PROTOCOL_VERSION,
            pid,
            flags: [
                "STRATA_HC_Q8",
                "STRATA_GR_FUSED",
                "STRATA_MMVQ_KREG",
                "STRATA_VNNI",
            ]
            .iter()
            .map(|f| (f.to_string(), on.contains(f)))
            .collect(),
        }),
    );
    app.ab_stderr(
        run,
        arm,
        "strata: STRATA_VNNI=1: integer-dot kernels (AVX-512 VNNI)",
    );
    ev(
        app,
        arm,
        loaded(SMOL, "llama", false, &["Q4_1", "Q8_0"], false),
    );
    for (k, &id) in ids.iter().enumerate() {
        ev(
            app,
            arm,
            Event::Token(Token {
                id: 1,
                text: decode(&[id]),
            }),
        );
        let w = ms + 0.1 * (k % 3) as f64;
        ev(
            app,
            arm,
            Event::Window(Window {
                id: 1,
                ms: w,
                t: 1,
                proposed: 0,
                accepted: 0,
            }),
        );
    }
    let acts = ev(app, arm, turn(1, 1000.0 / ms, Stop::MaxTokens));
    assert_eq!(
        acts,
        [Action::Ab(AbAction::Send {
            arm,
            req: Request::Ids { id: 1 }
        })]
    );
    let acts = ev(
        app,
        arm,
        Event::Ids(Ids {
            id: 1,
            prompt: vec![1, 2, 3, 4],
            reply: ids.to_vec(),
        }),
    );
    assert_eq!(
        acts,
        [Action::Ab(AbAction::Send {
            arm,
            req: Request::Stats {}
        })]
    );
    ev(
        app,
        arm,
        Event::Devices(Devices {
            cards: vec![card(0, [92, 24, 8, 1], 22_000, None)],
        }),
    )
}

/// A finished parallel A/B of default against vnni that parts at token 5.
fn parted() -> App {
    let mut app = ready_app();
    app.handle_key(ctrl('b'));
    let acts = app.ab_begin(spec("default", "vnni"), plan(92 * MIB, Some(20_000 * MIB)));
    assert_eq!(acts.len(), 2, "both engines at once: {acts:?}");
    let a = answer(&mut app, 0, 5001, &[], BASE, 12.0);
    assert_eq!(a, [Action::Ab(AbAction::Shutdown { arm: 0 })]);
    let b = answer(&mut app, 1, 5002, &["STRATA_VNNI"], OTHER, 9.0);
    assert_eq!(
        b,
        [
            Action::Ab(AbAction::Shutdown { arm: 1 }),
            Action::Ab(AbAction::Finished)
        ]
    );
    assert_eq!(app.ab_finish(&decode), [Action::Ab(AbAction::SaveMedians)]);
    app
}

#[test]
fn plan_runs_both_at_once_only_when_they_fit() {
    let p = plan(92 * MIB, Some(20_000 * MIB));
    assert_eq!(p.mode, Mode::Parallel);
    assert!(
        p.note.contains("both arms at once") && p.note.contains("19.5 GiB"),
        "{}",
        p.note
    );
    // two engines of an 8 GiB model do not fit in 12 GiB
    let p = plan(8 << 30, Some(12 << 30));
    assert_eq!(p.mode, Mode::Sequential);
    assert!(
        p.note.contains("one arm after the other") && p.note.contains("12.0 GiB"),
        "{}",
        p.note
    );
    assert_eq!(plan(92 * MIB, None).mode, Mode::Sequential);
}

#[test]
fn the_pane_opens_on_the_presets_ab_arms_and_picks_with_the_keys() {
    let mut app = ready_app();
    app.handle_key(ctrl('b'));
    assert_eq!(app.overlay, Overlay::Ab);
    let name = |app: &App, i: usize| app.ab.choices[app.ab.pick[i]].name.clone();
    // the default preset's [ab]: run = ["default", "unfused"], its prompt
    assert_eq!(
        (name(&app, 0), name(&app, 1)),
        ("default".into(), "unfused".into())
    );
    assert_eq!(app.ab.prompt.text(), "Why is the sky blue?");
    // the built-in arms, then the presets' named ones (the default preset's `unfused`)
    let names: Vec<&str> = app.ab.choices.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(
        names,
        ["default", "kreg", "hc-q8", "gr-fused", "vnni", "unfused"]
    );
    app.handle_key(key(KeyCode::Tab));
    app.handle_key(key(KeyCode::Up));
    assert_ne!(name(&app, 1), "unfused");
    assert_eq!(name(&app, 0), "default", "Tab moved the focus to B");
    app.handle_key(key(KeyCode::Down));
    assert_eq!(name(&app, 1), "unfused");
    // the same arm twice is refused (the A/B's spec check), nothing spawned
    app.handle_key(key(KeyCode::Tab));
    while name(&app, 0) != "unfused" {
        app.handle_key(key(KeyCode::Down));
    }
    assert!(app.handle_key(key(KeyCode::Enter)).is_empty());
    assert!(app.notice.as_ref().unwrap().text.contains("named twice"));
    // Esc with nothing running closes
    app.handle_key(key(KeyCode::Esc));
    assert_eq!(app.overlay, Overlay::None);
}

#[test]
fn enter_starts_the_arms_with_their_flags_one_seed_and_the_protocol() {
    let mut app = ready_app();
    app.handle_key(ctrl('b'));
    let acts = app.handle_key(key(KeyCode::Enter));
    let Some(Action::Ab(AbAction::Spawn {
        arm: 0, flags, env, ..
    })) = acts.first()
    else {
        panic!("{acts:?}")
    };
    assert!(flags.values().all(|on| !on), "default: every toggle off");
    assert_eq!(
        env["STRATA_FUSED"], "",
        "unset in its engine, whatever the shell has"
    );
    let r = app.ab.run.as_ref().unwrap();
    let second = acts.get(1);
    match r.plan.mode {
        Mode::Parallel => {
            let Some(Action::Ab(AbAction::Spawn { arm: 1, env, .. })) = second else {
                panic!("{acts:?}")
            };
            assert_eq!(env["STRATA_FUSED"], "0", "the unfused arm");
        }
        Mode::Sequential => assert_eq!(second, None),
    }
    assert_eq!(r.spec.n, 64, "the preset's [ab] n");
    // hello -> load (the A/B's context, not the auto one), loaded -> generate (fixed seed)
    let run = run_id(&app);
    let acts = app.ab_client(run, 0, ClientEvent::Engine(hello(&[])));
    let [Action::Ab(AbAction::Send {
        arm: 0,
        req: Request::Load(l),
    })] = acts.as_slice()
    else {
        panic!("{acts:?}")
    };
    assert_eq!((l.ctx, l.sampling.max_tokens), (AB_CTX, 64));
    let acts = app.ab_client(
        run,
        0,
        ClientEvent::Engine(loaded(SMOL, "llama", false, &["Q4_1"], false)),
    );
    let [Action::Ab(AbAction::Send {
        arm: 0,
        req: Request::Generate(g),
    })] = acts.as_slice()
    else {
        panic!("{acts:?}")
    };
    assert!(g.sampling.seed.is_some(), "the same seed for both arms");
    assert_eq!(g.messages.last().unwrap().content, "Why is the sky blue?");
    assert_eq!(
        app.ab.run.as_ref().unwrap().arms[0].phase,
        Phase::Generating
    );
    // a second Enter while it runs is refused; Esc stops both engines, a second Esc closes
    assert!(app.handle_key(key(KeyCode::Enter)).is_empty());
    let acts = app.handle_key(key(KeyCode::Esc));
    assert!(
        acts.contains(&Action::Ab(AbAction::Shutdown { arm: 0 })),
        "{acts:?}"
    );
    assert_eq!(app.overlay, Overlay::Ab);
    assert_eq!(app.ab.run.as_ref().unwrap().arms[0].phase, Phase::Stopped);
    app.handle_key(key(KeyCode::Esc));
    assert_eq!(app.overlay, Overlay::None);
}

#[test]
fn sequential_runs_b_after_a_and_not_after_a_failure() {
    let mut app = ready_app();
    let acts = app.ab_begin(spec("default", "vnni"), plan(8 << 30, Some(12 << 30)));
    assert_eq!(acts.len(), 1, "only arm A starts: {acts:?}");
    assert_eq!(app.ab.run.as_ref().unwrap().arms[1].phase, Phase::Waiting);
    let acts = answer(&mut app, 0, 5001, &[], BASE, 12.0);
    assert!(matches!(
        acts.as_slice(),
        [
            Action::Ab(AbAction::Shutdown { arm: 0 }),
            Action::Ab(AbAction::Spawn { arm: 1, .. })
        ]
    ));
    // a failed first arm: the second never starts
    let mut app = ready_app();
    app.ab_begin(spec("default", "vnni"), plan(8 << 30, Some(12 << 30)));
    let run = run_id(&app);
    let acts = app.ab_client(
        run,
        0,
        ClientEvent::Died {
            reason: "killed".into(),
            in_flight: vec![1],
        },
    );
    assert_eq!(acts, [Action::Ab(AbAction::Shutdown { arm: 0 })]);
    let r = app.ab.run.as_ref().unwrap();
    assert_eq!(r.arms[0].phase, Phase::Failed("killed".into()));
    assert_eq!(r.arms[1].phase, Phase::Stopped);
    assert!(app
        .notice
        .as_ref()
        .unwrap()
        .text
        .contains("arm default: killed"));
}

#[test]
fn events_of_an_earlier_run_are_dropped() {
    let mut app = ready_app();
    app.ab_begin(spec("default", "vnni"), plan(92 * MIB, Some(20_000 * MIB)));
    let old = run_id(&app);
    app.overlay = Overlay::Ab;
    app.handle_key(key(KeyCode::Esc)); // stops it: a new run may start
    app.ab_begin(spec("default", "kreg"), plan(92 * MIB, Some(20_000 * MIB)));
    assert_ne!(run_id(&app), old);
    let acts = app.ab_client(old, 0, ClientEvent::Engine(hello(&[])));
    assert!(acts.is_empty());
    assert!(app.ab.run.as_ref().unwrap().arms[0].hello_flags.is_empty());
}

#[test]
fn the_divergence_is_placed_in_both_columns_with_the_ratio_and_medians() {
    let app = parted();
    let r = app.ab.run.as_ref().unwrap();
    let o = r.outcome.as_ref().unwrap();
    let d = o.divergence.as_ref().unwrap();
    assert_eq!(
        (d.position, d.base_piece.as_str(), d.arm_piece.as_str()),
        (5, " of", " light")
    );
    // "The sky is blue because" is 23 characters in both, then the differing token
    assert_eq!(o.at, [(23, 3), (23, 6)]);
    let ratio = r.ratio().unwrap();
    assert!((ratio - 0.75).abs() < 0.02, "9 ms against 12 ms: {ratio}");
    assert_eq!(app.ab.medians.sets["STRATA_VNNI=1"].sources, ["vnni"]);
    assert_eq!(
        app.ab.medians.sets["STRATA_VNNI=1"].window_ms.len(),
        OTHER.len()
    );
    assert!(app.ab.medians_dirty);
    assert!(app
        .notice
        .as_ref()
        .unwrap()
        .text
        .contains("part at token 5"));
}

#[test]
fn snapshot_ab_pane_parted() {
    let app = parted();
    let t = draw(&app, 130, 40);
    let screen: String = {
        let b = t.backend().buffer();
        (0..b.area.height)
            .map(|y| {
                (0..b.area.width)
                    .map(|x| b[(x, y)].symbol())
                    .collect::<String>()
                    + "\n"
            })
            .collect()
    };
    assert!(
        screen.contains("A: default") && screen.contains("B: vnni"),
        "{screen}"
    );
    assert!(
        screen.matches("▲ parts at token 5").count() == 2,
        "in both columns:\n{screen}"
    );
    assert!(screen.contains("B/A window ms 0.7"), "{screen}");
    // the parting token is highlighted in both columns
    let b = t.backend().buffer();
    let highlighted: Vec<String> = (0..b.area.height)
        .map(|y| {
            (0..b.area.width)
                .filter(|&x| b[(x, y)].bg == ratatui::style::Color::Yellow)
                .map(|x| b[(x, y)].symbol().to_string())
                .collect()
        })
        .filter(|s: &String| s.contains("of") || s.contains("light"))
        .collect();
    assert!(
        highlighted
            .iter()
            .any(|s| s.contains(" of") && s.contains(" light")),
        "{highlighted:?}"
    );
    insta::assert_snapshot!(t.backend());
}

#[test]
fn identical_replies_say_so() {
    let mut app = ready_app();
    app.ab_begin(
        spec("default", "STRATA_FUSED=0"),
        plan(92 * MIB, Some(20_000 * MIB)),
    );
    answer(&mut app, 0, 5001, &[], BASE, 12.0);
    answer(&mut app, 1, 5002, &[], BASE, 12.5);
    app.ab_finish(&decode);
    let o = app.ab.run.as_ref().unwrap().outcome.clone().unwrap();
    assert_eq!(o.divergence, None);
    assert!(app
        .notice
        .as_ref()
        .unwrap()
        .text
        .contains("identical (9 tokens)"));
    let screen = format!("{:?}", draw(&app, 130, 40).backend());
    assert!(screen.contains("identical"), "{screen}");
}

#[test]
fn the_report_goes_through_strata_abs_writer() {
    let app = parted();
    let r = app.ab.run.as_ref().unwrap();
    let build = BuildId {
        program: "strata".into(),
        version: "0".into(),
        sha256: "0".into(),
        bytes: 0,
        git: None,
    };
    let run = to_ab_run(r, build, "test host".into()).unwrap();
    assert_eq!(run.runs.len(), 2);
    assert_eq!(
        run.runs[1].latch,
        ["strata: STRATA_VNNI=1: integer-dot kernels (AVX-512 VNNI)"]
    );
    let cmp = compare::compare(&run, &decode);
    assert!(
        cmp.checks.same_prompt_tokens && cmp.checks.flags_latched,
        "{cmp:?}"
    );
    let Identity::Differs(d) = &cmp.arms[1].outputs[0] else {
        panic!("{:?}", cmp.arms[1].outputs)
    };
    assert_eq!(d.position, 5);
    // the files: Markdown and JSON, named in the notice's form
    let dir = tempfile::tempdir().unwrap();
    let (md, json) = export(r, dir.path(), &decode).unwrap();
    let md_text = std::fs::read_to_string(&md).unwrap();
    assert!(md_text.contains("### A/B: default vs vnni"), "{md_text}");
    assert!(
        md_text.contains("vnni parts from default at reply token 5"),
        "{md_text}"
    );
    let j: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(j["comparison"]["arms"][1]["outputs"][0]["position"], 5);
    assert_eq!(j["runs"][0]["pid"], 5001);
    // a second export in the same second does not overwrite the first
    let (md2, _) = export(r, dir.path(), &decode).unwrap();
    assert_ne!(md, md2);
    // an unfinished run has nothing to report
    let mut app = ready_app();
    app.ab_begin(spec("default", "vnni"), plan(92 * MIB, Some(20_000 * MIB)));
    app.handle_key(ctrl('b'));
    assert!(app.handle_key(ctrl('e')).is_empty());
    assert!(app
        .notice
        .as_ref()
        .unwrap()
        .text
        .contains("no finished A/B"));
}

#[test]
fn chat_windows_count_under_the_running_flags() {
    let mut app = ready_app();
    let id = send(&mut app, "Hi");
    windows(&mut app, id, &[10.0, 12.0, 14.0], &[0, 0, 0]);
    assert_eq!(app.ab.medians.spread("-").unwrap().median, 12.0);
    assert_eq!(app.ab.medians.sets["-"].sources, ["chat"]);
    app.apply_event(turn(id, 80.0, Stop::Eos));
    app.apply_event(hello(&[("STRATA_VNNI", true)]));
    app.apply_event(loaded(SMOL, "llama", false, &["Q4_1"], false));
    let id = send(&mut app, "Again");
    windows(&mut app, id, &[8.0], &[0]);
    assert_eq!(app.ab.medians.spread("STRATA_VNNI=1").unwrap().n, 1);
}

#[test]
fn a_bitwise_arm_whose_reply_differs_is_a_warning() {
    let mut app = ready_app();
    app.handle_key(ctrl('b'));
    app.ab_begin(
        spec("default", "STRATA_FUSED=0"),
        plan(92 * MIB, Some(20_000 * MIB)),
    );
    answer(&mut app, 0, 5001, &[], BASE, 12.0);
    answer(&mut app, 1, 5002, &[], OTHER, 12.5);
    app.ab_finish(&decode);
    let o = app.ab.run.as_ref().unwrap().outcome.clone().unwrap();
    assert!(o.bitwise);
    assert_eq!(
        o.warnings,
        ["arm B's flags are bitwise (STRATA_FUSED=0), yet its reply differs from arm A's"]
    );
    let n = app.notice.clone().unwrap();
    assert_eq!(n.level, super::app::Level::Warn);
    let screen = format!("{:?}", draw(&app, 130, 40).backend());
    assert!(screen.contains("⚠ arm B's flags are bitwise"), "{screen}");
    // a non-bitwise arm that parts is no warning, and says what its flags promise
    let app = parted();
    let o = app.ab.run.as_ref().unwrap().outcome.clone().unwrap();
    assert!(!o.bitwise && o.warnings.is_empty());
    let screen = format!("{:?}", draw(&app, 130, 40).backend());
    assert!(screen.contains("not bitwise: may differ"), "{screen}");
}
