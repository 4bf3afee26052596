//! Independent check of strata's dequantizers against gguf-py (`gguf.quants`, numpy), run by
//! `scripts/quant_dump.py` under $STRATA_PYTHON:
//! - every tensor of both real models (streamed over a pipe, compared chunk by chunk),
//! - random blocks of every supported stored format (random bytes, sane f16 scales),
//! - gguf-py's quantizers vs ours for the formats it can quantize.
//!
//! All comparisons are bitwise on the f32 outputs; the measured differences are printed.

use rand::{rngs::StdRng, Rng, SeedableRng};
use std::collections::BTreeMap;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use strata::quant::{self, type_id};

fn python() -> String {
    strata::paths::setup_var("STRATA_PYTHON").unwrap_or_else(|| {
        panic!("STRATA_PYTHON is not set and .strata/env has no entry: run `make setup` first")
    })
}

fn script() -> PathBuf {
    strata::paths::project_root().join("scripts/quant_dump.py")
}

#[derive(Default, Debug)]
struct Stats {
    tensors: usize,
    values: usize,
    bit_mismatches: usize,
    max_abs: f64,
    max_rel: f64,
}

impl Stats {
    /// `theirs_le`: gguf-py's values as little-endian f32 bytes.
    fn add_le(&mut self, ours: &[f32], theirs_le: &[u8]) {
        self.values += ours.len();
        for (&a, b) in ours.iter().zip(theirs_le.chunks_exact(4)) {
            let b = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            if a.to_bits() != b.to_bits() {
                self.bit_mismatches += 1;
                let d = (a as f64 - b as f64).abs();
                if d.is_finite() {
                    self.max_abs = self.max_abs.max(d);
                    self.max_rel = self
                        .max_rel
                        .max(d / (b as f64).abs().max(f64::MIN_POSITIVE));
                } else {
                    self.max_abs = f64::INFINITY; // NaN vs number, or NaN payloads differ
                }
            }
        }
    }
}

fn print_table(title: &str, stats: &BTreeMap<String, Stats>) {
    println!("{title}");
    println!(
        "  {:<8} {:>8} {:>12} {:>14} {:>12} {:>12}",
        "type", "tensors", "values", "bit-mismatch", "max_abs", "max_rel"
    );
    for (t, s) in stats {
        println!(
            "  {:<8} {:>8} {:>12} {:>14} {:>12.3e} {:>12.3e}",
            t, s.tensors, s.values, s.bit_mismatches, s.max_abs, s.max_rel
        );
    }
}

fn read_exact_vec(r: &mut impl Read, n: usize, what: &str) -> Vec<u8> {
    let mut v = vec![0u8; n];
    r.read_exact(&mut v)
        .unwrap_or_else(|e| panic!("quant_dump.py stream ended inside {what}: {e}"));
    v
}

/// Streams one model through quant_dump.py and compares every tensor chunk.
fn compare_model(env_key: &str) -> BTreeMap<String, Stats> {
    let model = strata::paths::model_path(env_key).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        model.exists(),
        "{env_key} points to {} which does not exist: run `make setup`",
        model.display()
    );
    let mut child = Command::new(python())
        .arg(script())
        .arg("model")
        .arg(&model)
        .arg("-")
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawning $STRATA_PYTHON scripts/quant_dump.py");
    let mut r = BufReader::with_capacity(1 << 20, child.stdout.take().expect("piped stdout"));
    let mut stats: BTreeMap<String, Stats> = BTreeMap::new();
    let mut ours = Vec::<f32>::new();
    let mut names = 0usize;
    loop {
        let len = u32::from_le_bytes(
            read_exact_vec(&mut r, 4, "header length")
                .try_into()
                .unwrap(),
        );
        let header: serde_json::Value =
            serde_json::from_slice(&read_exact_vec(&mut r, len as usize, "header"))
                .expect("quant_dump.py header is JSON");
        if header["end"].as_bool() == Some(true) {
            assert_eq!(
                header["tensors"].as_u64(),
                Some(names as u64),
                "tensor count"
            );
            break;
        }
        let name = header["name"].as_str().expect("name").to_string();
        let ty = header["type"].as_str().expect("type").to_string();
        let tid = header["type_id"].as_u64().expect("type_id") as u32;
        let raw_len = header["raw_len"].as_u64().expect("raw_len") as usize;
        let n_values = header["n_values"].as_u64().expect("n_values") as usize;
        let raw = read_exact_vec(&mut r, raw_len, &name);
        let theirs = read_exact_vec(&mut r, n_values * 4, &name);
        assert_eq!(quant::type_name(tid).unwrap(), ty, "type name of id {tid}");
        ours.clear();
        ours.resize(n_values, 0.0);
        quant::dequantize_by_type(tid, &raw, &mut ours)
            .unwrap_or_else(|e| panic!("tensor {name}: {e}"));
        let s = stats.entry(ty).or_default();
        if header["chunk"].as_u64() == Some(0) {
            s.tensors += 1;
            names += 1;
        }
        s.add_le(&ours, &theirs);
    }
    let status = child.wait().expect("waiting for quant_dump.py");
    assert!(
        status.success(),
        "quant_dump.py failed on {}",
        model.display()
    );
    stats
}

fn assert_bitwise(stats: &BTreeMap<String, Stats>, what: &str) {
    for (t, s) in stats {
        assert!(s.values > 0, "{what}: no values of {t}");
        assert_eq!(
            s.bit_mismatches, 0,
            "{what}: {t} differs from gguf-py in {} of {} values (max abs {:e})",
            s.bit_mismatches, s.values, s.max_abs
        );
    }
}

#[test]
fn smollm2_every_tensor_matches_gguf_py() {
    let stats = compare_model(strata::paths::SMOLLM2_ENV);
    print_table("SmolLM2-135M Q4_1 vs gguf-py:", &stats);
    for t in ["F32", "Q4_1", "Q8_0"] {
        assert!(stats.contains_key(t), "SmolLM2 should contain {t} tensors");
    }
    assert_bitwise(&stats, "SmolLM2");
}

#[test]
fn gemma3_every_tensor_matches_gguf_py() {
    let stats = compare_model(strata::paths::GEMMA3_ENV);
    print_table("Gemma-3-270M Q4_K_M vs gguf-py:", &stats);
    for t in ["F32", "Q5_0", "Q4_K", "Q6_K", "Q8_0"] {
        assert!(stats.contains_key(t), "Gemma 3 should contain {t} tensors");
    }
    assert_bitwise(&stats, "Gemma 3");
}

/// Byte offsets of the f16 scale fields in a block, which random bytes must keep finite.
fn f16_fields(tid: u32) -> &'static [usize] {
    match tid {
        type_id::Q4_0 | type_id::Q5_0 | type_id::Q8_0 | type_id::IQ4_XS => &[0],
        type_id::IQ4_NL => &[0],
        type_id::Q2_K => &[80, 82],
        type_id::Q3_K => &[108],
        type_id::Q4_1 | type_id::Q5_1 | type_id::Q4_K | type_id::Q5_K => &[0, 2],
        type_id::Q6_K => &[208],
        type_id::IQ2_S | type_id::IQ1_S => &[0],
        type_id::IQ2_XXS | type_id::IQ2_XS | type_id::IQ3_XXS | type_id::IQ3_S => &[0],
        _ => &[],
    }
}

/// Random blocks: random bytes everywhere, f16 scales random finite values of either sign.
fn random_blocks(rng: &mut StdRng, tid: u32, n_blocks: usize) -> Vec<u8> {
    let (_, bb) = quant::block_info(tid).unwrap();
    let mut bytes: Vec<u8> = (0..n_blocks * bb).map(|_| rng.gen()).collect();
    for blk in bytes.chunks_exact_mut(bb) {
        for &off in f16_fields(tid) {
            let mag = 2f32.powf(rng.gen_range(-14.0..4.0));
            let v = if rng.gen() { mag } else { -mag };
            blk[off..off + 2].copy_from_slice(&half::f16::from_f32(v).to_le_bytes());
        }
        if tid == type_id::IQ1_M {
            // IQ1_M's f16 scale is the top nibbles of the four u16 scale words (bytes 48..56)
            let d = half::f16::from_f32(2f32.powf(rng.gen_range(-14.0..4.0))).to_bits();
            for k in 0..4 {
                let at = 48 + 2 * k;
                let w = u16::from_le_bytes([blk[at], blk[at + 1]]) & 0x0FFF;
                let w = w | ((d >> (4 * k)) & 0xF) << 12;
                blk[at..at + 2].copy_from_slice(&w.to_le_bytes());
            }
        }
    }
    bytes
}

fn run_script(args: &[&std::ffi::OsStr]) {
    let out = Command::new(python())
        .arg(script())
        .args(args)
        .output()
        .expect("spawning $STRATA_PYTHON scripts/quant_dump.py");
    assert!(
        out.status.success(),
        "quant_dump.py {:?} failed: {}",
        args,
        String::from_utf8_lossy(&out.stderr)
    );
}

fn read_f32_le(path: &Path) -> Vec<u8> {
    std::fs::read(path).expect("reading quant_dump.py output")
}

fn gguf_py_dequantize(dir: &Path, type_name: &str, raw: &[u8]) -> Vec<u8> {
    let inp = dir.join(format!("{type_name}.raw"));
    let out = dir.join(format!("{type_name}.f32"));
    std::fs::write(&inp, raw).unwrap();
    run_script(&[
        "blocks".as_ref(),
        type_name.as_ref(),
        inp.as_os_str(),
        out.as_os_str(),
    ]);
    read_f32_le(&out)
}

#[test]
fn random_blocks_of_every_format_match_gguf_py() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(0x5151);
    let types = [
        type_id::F32,
        type_id::F16,
        type_id::BF16,
        type_id::Q4_0,
        type_id::Q4_1,
        type_id::Q5_0,
        type_id::Q5_1,
        type_id::Q8_0,
        type_id::Q4_K,
        type_id::Q5_K,
        type_id::Q6_K,
        type_id::IQ4_XS,
        type_id::IQ2_S,
        type_id::IQ1_S,
        type_id::IQ1_M,
        type_id::IQ2_XXS,
        type_id::IQ2_XS,
        type_id::IQ3_XXS,
        type_id::IQ3_S,
        type_id::Q2_K,
        type_id::Q3_K,
        type_id::IQ4_NL,
    ];
    let mut stats: BTreeMap<String, Stats> = BTreeMap::new();
    for tid in types {
        let name = quant::type_name(tid).unwrap();
        let (be, _) = quant::block_info(tid).unwrap();
        let n_blocks = 8192 / be.min(32) * 4; // ~32k values of each
        let raw = random_blocks(&mut rng, tid, n_blocks);
        let theirs = gguf_py_dequantize(dir.path(), name, &raw);
        let mut ours = vec![0f32; n_blocks * be];
        quant::dequantize_by_type(tid, &raw, &mut ours).unwrap();
        assert_eq!(theirs.len(), ours.len() * 4, "{name}: value count");
        let s = stats.entry(name.to_string()).or_default();
        s.tensors += 1;
        s.add_le(&ours, &theirs);
    }
    // Q8_1 is not in gguf-py: its d/qs are Q8_0's, so decode the same blocks as Q8_0 there.
    let q81 = random_blocks(&mut rng, type_id::Q8_0, 1024);
    let as_q81: Vec<u8> = q81
        .chunks_exact(34)
        .flat_map(|b| [&b[..2], &[0x12, 0x34][..], &b[2..]].concat())
        .collect();
    let theirs = gguf_py_dequantize(dir.path(), "Q8_0", &q81);
    let mut ours = vec![0f32; 1024 * 32];
    quant::dequantize_by_type(type_id::Q8_1, &as_q81, &mut ours).unwrap();
    let s = stats.entry("Q8_1".into()).or_default();
    s.tensors += 1;
    s.add_le(&ours, &theirs);
    print_table("random blocks vs gguf-py:", &stats);
    assert_bitwise(&stats, "random blocks");
}

/// Excerpts of real llama-quantize output (tests/data/quant/<model>-<file type>.<tensor>.<rows>.
/// <TYPE>.raw: a few rows' GGUF bytes, cut by scripts/quant_excerpt.py, see
/// tests/data/quant/README.md) decode bitwise as gguf-py decodes them.
#[test]
fn real_excerpts_match_gguf_py() {
    let dir = tempfile::tempdir().unwrap();
    let data = strata::paths::project_root().join("tests/data/quant");
    let mut stats: BTreeMap<String, Stats> = BTreeMap::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&data)
        .expect("tests/data/quant")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "raw"))
        .collect();
    files.sort();
    for path in files {
        let stem = path.file_stem().unwrap().to_string_lossy().to_string();
        let name = stem.rsplit('.').next().unwrap();
        let tid = (0..64u32)
            .find(|&t| quant::type_name(t).is_ok_and(|n| n == name))
            .unwrap_or_else(|| panic!("{}: no ggml type {name}", path.display()));
        let raw = std::fs::read(&path).unwrap();
        let mut ours = vec![0f32; quant::values_in(tid, raw.len()).unwrap()];
        quant::dequantize_by_type(tid, &raw, &mut ours).unwrap();
        let theirs = gguf_py_dequantize(dir.path(), name, &raw);
        assert_eq!(theirs.len(), ours.len() * 4, "{stem}: value count");
        // not all zero: the excerpt holds real weights
        assert!(ours.iter().any(|&v| v != 0.0), "{stem}: all zero");
        let s = stats.entry(name.to_string()).or_default();
        s.tensors += 1;
        s.add_le(&ours, &theirs);
    }
    print_table("real excerpts (tests/data/quant) vs gguf-py:", &stats);
    let want = [
        "IQ2_S", "IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ3_S",
    ];
    for t in want {
        assert!(
            stats.contains_key(t),
            "tests/data/quant should hold a {t} excerpt"
        );
    }
    assert_bitwise(&stats, "real excerpts");
}

#[test]
fn quantizers_match_gguf_py() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(0x9e37);
    let x: Vec<f32> = (0..32 * 2048)
        .map(|i| {
            let u: f32 = (0..4).map(|_| rng.gen::<f32>()).sum::<f32>() - 2.0;
            if i % 101 == 7 {
                u * 8.0
            } else {
                u
            }
        })
        .collect();
    let inp = dir.path().join("x.f32");
    std::fs::write(
        &inp,
        x.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>(),
    )
    .unwrap();
    println!("our quantizers vs gguf-py's (identical bytes expected):");
    for tid in [
        type_id::F16,
        type_id::BF16,
        type_id::Q4_0,
        type_id::Q4_1,
        type_id::Q5_0,
        type_id::Q5_1,
        type_id::Q8_0,
    ] {
        let name = quant::type_name(tid).unwrap();
        let out = dir.path().join(format!("{name}.q"));
        run_script(&[
            "quantize".as_ref(),
            name.as_ref(),
            inp.as_os_str(),
            out.as_os_str(),
        ]);
        let theirs = std::fs::read(&out).unwrap();
        let ours = quant::quantize_by_type(tid, &x).unwrap();
        assert_eq!(ours.len(), theirs.len(), "{name}: quantized length");
        let (_, bb) = quant::block_info(tid).unwrap();
        let differing = ours
            .chunks_exact(bb)
            .zip(theirs.chunks_exact(bb))
            .filter(|(a, b)| a != b)
            .count();
        println!(
            "  {name:<6} {differing} of {} blocks differ",
            ours.len() / bb
        );
        assert_eq!(differing, 0, "{name}: our quantizer differs from gguf-py's");
    }
}
