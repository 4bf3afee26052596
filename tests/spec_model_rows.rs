//! The verify window at the model level, on both real models: a forward pass over T rows gives
//! each row's logits bitwise equal to decoding those tokens one row at a time; and rolling the
//! cache back over rejected rows leaves no trace (the next tokens' logits equal those of a run
//! that never saw the rejected rows).
mod spec_support;
use spec_support::*;

fn bitwise_eq(a: &[f32], b: &[f32]) -> Option<usize> {
    (0..a.len()).find(|&i| a[i].to_bits() != b[i].to_bits())
}

#[test]
fn verify_rows_are_bitwise_one_row_decoding() {
    for (name, env, chat) in MODELS {
        let mut m = load(name, env, chat, 512);
        let prompt = m.prompt("List three colours of the rainbow.");
        let p = prompt.len();
        let window: Vec<u32> = m
            .prompt("Red, orange, yellow and green")
            .into_iter()
            .rev()
            .take(8)
            .collect();
        let e = m.gen.engine_mut();
        e.forward(&prompt, 0, &[p - 1]).unwrap();
        for t in [8usize, 5, 2] {
            let rows: Vec<usize> = (0..t).collect();
            let all = e.forward(&window[..t], p, &rows).unwrap();
            for (r, want) in all.iter().enumerate() {
                // one-row decoding of the same tokens, from the same prefix (rollback to p + r)
                let one = e.forward(&window[r..r + 1], p + r, &[0]).unwrap().remove(0);
                if let Some(i) = bitwise_eq(&one, want) {
                    panic!(
                        "{name}: T = {t}, row {r}: logit {i} differs: {} (one row) vs {} (T rows)",
                        one[i], want[i]
                    );
                }
            }
            println!("{name}: verify window T = {t} at position {p}: every row's {} logits bitwise equal to one-row decoding", all[0].len());
        }
    }
}

#[test]
fn rollback_leaves_no_trace_of_rejected_rows() {
    for (name, env, chat) in MODELS {
        let mut m = load(name, env, chat, 512);
        let prompt = m.prompt("Name a large animal.");
        let p = prompt.len();
        let real = m.prompt("The elephant is large");
        let (a, b, c) = (
            real[real.len() - 3],
            real[real.len() - 2],
            real[real.len() - 1],
        );
        let junk: Vec<u32> = m
            .prompt("zebra quantum violin 1999")
            .into_iter()
            .rev()
            .take(4)
            .collect();
        let e = m.gen.engine_mut();
        // clean: a, b, c decoded one at a time
        e.forward(&prompt, 0, &[p - 1]).unwrap();
        let clean: Vec<Vec<f32>> = [a, b, c]
            .iter()
            .enumerate()
            .map(|(i, &t)| e.forward(&[t], p + i, &[0]).unwrap().remove(0))
            .collect();
        // dirty: a window [a, junk x4] writes junk K/V at p+1..p+4; roll back to p+1, decode b, c
        e.reset();
        e.forward(&prompt, 0, &[p - 1]).unwrap();
        let mut w = vec![a];
        w.extend_from_slice(&junk);
        let first = e.forward(&w, p, &[0]).unwrap().remove(0);
        let after: Vec<Vec<f32>> = [b, c]
            .iter()
            .enumerate()
            .map(|(i, &t)| e.forward(&[t], p + 1 + i, &[0]).unwrap().remove(0))
            .collect();
        assert_eq!(
            bitwise_eq(&first, &clean[0]),
            None,
            "{name}: row 0 of the rejected window"
        );
        for (i, (x, y)) in after.iter().zip(&clean[1..]).enumerate() {
            if let Some(k) = bitwise_eq(x, y) {
                panic!(
                    "{name}: token {} after rollback: logit {k} differs: {} vs {} (clean)",
                    i + 1,
                    x[k],
                    y[k]
                );
            }
        }
        println!("{name}: after rolling back 4 rejected rows, the next 2 tokens' logits are bitwise those of a clean run");
    }
}
