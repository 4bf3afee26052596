use strata::gguf::Gguf;
use strata::reference::{RefModel, RefSession};

#[test]
fn scratch() {
    let p = strata::paths::model_path(strata::paths::SMOLLM2_ENV).unwrap();
    let g = Gguf::open(&p).unwrap();
    let toks = g.get_str_array("tokenizer.ggml.tokens").unwrap().to_vec();
    let t0 = std::time::Instant::now();
    let m = RefModel::load(&g).unwrap();
    eprintln!("load {:?}", t0.elapsed());
    let mut s = RefSession::new(&m, 256);
    let prompt = [504u32, 3575, 282, 4649, 314];
    let mut logits = s.forward(&prompt, 0).unwrap().pop().unwrap();
    let mut out = String::new();
    for i in 0..8 {
        let best = (0..logits.len()).max_by(|&a, &b| logits[a].total_cmp(&logits[b]).then(b.cmp(&a))).unwrap();
        let mut idx: Vec<usize> = (0..logits.len()).collect();
        idx.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
        eprintln!("{i}: {:?} {} | {:?} {}", toks[idx[0]], logits[idx[0]], toks[idx[1]], logits[idx[1]]);
        out.push_str(&toks[best].replace('Ġ', " ").replace('Ċ', "\n"));
        logits = s.forward(&[best as u32], prompt.len() + i).unwrap().pop().unwrap();
    }
    eprintln!("{:?} in {:?}", out, t0.elapsed());
}
