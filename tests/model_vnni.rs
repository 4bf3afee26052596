//! The engine with the opt-in integer-dot products (`Engine::set_int_dot`, the `STRATA_VNNI=1` of
//! engine/kernels/vnni.rs) against the default kernels, on the real GGUF files: the logits of a
//! 37-token prompt (a chunk of 32 rows through the prompt's products, then 5) and of decode /
//! verify steps of T = 1, 2, 5, 8 rows. Not
//! bitwise (the integer sums round once, the float kernel along its chains, and a last-bit change
//! can move an 8-bit activation rounding one step in a later layer): the logits must stay closer
//! to the default ones than the engine with f32 activations (`--f32-act`) is, a decode step must
//! launch the integer-dot kernel, and turning the flag off must give the default bits back.

mod support;
use strata::model::Engine;
use support::model::{engine, run};

/// sum of squared differences over sum of squares of `b`, over every row.
fn nmse(a: &[Vec<f32>], b: &[Vec<f32>]) -> f64 {
    let (mut num, mut den) = (0f64, 0f64);
    for (ra, rb) in a.iter().zip(b) {
        for (&x, &y) in ra.iter().zip(rb) {
            num += (x as f64 - y as f64).powi(2);
            den += (y as f64).powi(2);
        }
    }
    num / den
}

fn bits_differ(a: &[Vec<f32>], b: &[Vec<f32>]) -> usize {
    a.iter()
        .zip(b)
        .map(|(ra, rb)| {
            ra.iter()
                .zip(rb)
                .filter(|(x, y)| x.to_bits() != y.to_bits())
                .count()
        })
        .sum()
}

/// The kernels one decode step launches: (label, launches).
fn step_kernels(e: &mut Engine) -> Vec<(String, usize)> {
    let q = e.queue().clone();
    q.trace_begin();
    let pos = e.pos();
    e.forward(&[17], pos, &[0]).unwrap();
    q.trace_end()
        .unwrap()
        .into_iter()
        .map(|k| (k.label, k.launches))
        .collect()
}

fn check(env: &str) {
    let mut e = engine(env, true, true);
    let plain = run(&mut e);
    assert!(!step_kernels(&mut e).iter().any(|(l, _)| l.contains("vnni")));
    if let Err(err) = e.set_int_dot(true) {
        // where the kernel cannot run, the refusal names the flag (and nothing else is checked)
        assert!(err.to_string().contains("STRATA_VNNI"), "{err}");
        println!("{env}: integer-dot kernel not runnable here: {err}");
        return;
    }
    let int = run(&mut e);
    let launched = step_kernels(&mut e);
    let vnni: usize = launched
        .iter()
        .filter(|(l, _)| l.contains("vnni"))
        .map(|(_, n)| n)
        .sum();
    assert!(
        vnni > 0,
        "{env}: no integer-dot launch in a decode step: {launched:?}"
    );
    // the yardstick: how far the f32-activation engine (`--f32-act`) is from the default one
    let f32_act = run(&mut engine(env, false, false));
    let (d_int, d_f32) = (nmse(&int, &plain), nmse(&f32_act, &plain));
    println!(
        "{env}: {} rows x {} logits; integer-dot vs default: {} differ, nmse {d_int:.2e}; \
         f32 activations vs default: nmse {d_f32:.2e}; {} integer-dot launches a step",
        int.len(),
        int[0].len(),
        bits_differ(&int, &plain),
        vnni
    );
    assert!(
        d_int < d_f32,
        "{env}: the integer-dot logits moved further ({d_int:.2e}) than f32 activations do \
         ({d_f32:.2e})"
    );
    // and back off: bitwise the default again
    e.set_int_dot(false).unwrap();
    let again = run(&mut e);
    assert_eq!(
        bits_differ(&again, &plain),
        0,
        "{env}: turning the flag off did not restore the default"
    );
}

#[test]
fn smollm2_int_dot_agrees_with_default() {
    check("STRATA_MODEL_SMOLLM2");
}

#[test]
fn gemma3_int_dot_agrees_with_default() {
    check("STRATA_MODEL_GEMMA3");
}
