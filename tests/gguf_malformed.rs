//! Malformed GGUF files: every truncation, every corrupted header field, duplicates, overlaps,
//! misalignment, vocabulary inconsistencies and bad hyper-parameters each give an error naming
//! the field, key or tensor at fault, never a panic. Files come from the writer (a valid sample)
//! and are then patched byte by byte.

mod gguf_common;

use gguf_common::*;
use strata::gguf::{GgmlType, Gguf, GgufError, HParams, Value};

/// An edit of the sample's metadata list before writing.
type MetaEdit = Box<dyn FnOnce(&mut Vec<(&'static str, Value)>)>;
/// A patch of a written file's bytes.
type BytePatch = Box<dyn Fn(&mut Vec<u8>)>;

/// Parses `bytes`, expecting an error; returns it with its message.
fn err(bytes: Vec<u8>) -> (GgufError, String) {
    match Gguf::from_bytes(bytes) {
        Ok(_) => panic!("malformed file was accepted"),
        Err(e) => {
            let msg = e.to_string();
            (e, msg)
        }
    }
}

fn assert_msg(bytes: Vec<u8>, wanted: &[&str]) -> GgufError {
    let (e, msg) = err(bytes);
    for w in wanted {
        assert!(msg.contains(w), "error {msg:?} does not mention {w:?}");
    }
    e
}

#[test]
fn sample_is_valid() {
    let g = Gguf::from_bytes(sample_bytes()).unwrap();
    HParams::from_gguf(&g).unwrap();
}

/// Cutting the file anywhere fails, and the error names what was being read at the cut.
#[test]
fn truncation_at_every_offset() {
    let full = sample_bytes();
    let meta = sample_metadata();
    let tensors = sample_tensors();
    // Where each kv entry and tensor info starts, found by its name (independently of the reader).
    let kv_start: Vec<usize> = meta
        .iter()
        .map(|(k, _)| find_gguf_string(&full, k))
        .collect();
    let ti_start: Vec<usize> = tensors
        .iter()
        .map(|(n, _, _)| find_gguf_string(&full, n))
        .collect();
    let g = Gguf::from_bytes(full.clone()).unwrap();
    // End of the tensor table: the padding after it may be cut without harm to the table.
    let (last, last_dims, _) = tensors.last().unwrap();
    let data_start = ti_start[tensors.len() - 1] + 8 + last.len() + 4 + 8 * last_dims.len() + 4 + 8;
    assert!(data_start <= g.data_offset() as usize);
    let ends: Vec<(String, u64)> = g
        .tensors()
        .iter()
        .map(|t| (t.name.clone(), t.file_offset + t.n_bytes))
        .collect();
    let last_end = ends.iter().map(|e| e.1).max().unwrap() as usize;

    let mut checked = 0;
    for cut in 0..full.len() {
        let (e, msg) = match Gguf::from_bytes(full[..cut].to_vec()) {
            Ok(_) if cut >= last_end => continue, // only trailing padding was cut
            Ok(_) => panic!("file cut at {cut} of {} was accepted", full.len()),
            Err(e) => {
                let m = e.to_string();
                (e, m)
            }
        };
        let expect: String = match cut {
            0..=3 => "magic".into(),
            4..=7 => "version".into(),
            8..=15 => "tensor count".into(),
            16..=23 => "metadata kv count".into(),
            _ if cut < ti_start[0] => {
                let i = kv_start
                    .iter()
                    .rposition(|&s| s <= cut)
                    .expect("cut after the first kv");
                if cut < kv_start[i] + 8 + meta[i].0.len() {
                    format!("metadata entry #{i}")
                } else {
                    format!("\"{}\"", meta[i].0)
                }
            }
            _ if cut < data_start => {
                let i = ti_start.iter().rposition(|&s| s <= cut).unwrap();
                if cut < ti_start[i] + 8 + tensors[i].0.len() {
                    format!("tensor #{i}")
                } else {
                    format!("\"{}\"", tensors[i].0)
                }
            }
            _ => {
                // In the data section the first tensor (in table order) that no longer fits is named.
                let (name, _) = ends.iter().find(|(_, end)| *end > cut as u64).unwrap();
                assert!(
                    matches!(e, GgufError::TensorPastEnd { .. }),
                    "cut {cut}: {msg}"
                );
                format!("\"{name}\"")
            }
        };
        // A count the rest of the file cannot hold is reported before the entries are read.
        let (n_kv, n_ti) = (meta.len(), tensors.len());
        let count_err = (msg.contains("metadata kv count") && cut.saturating_sub(24) < n_kv * 13)
            || (msg.contains("tensor count") && cut.saturating_sub(ti_start[0]) < n_ti * 32);
        if !msg.contains(&expect) {
            assert!(
                count_err && msg.contains("can hold at most"),
                "cut at {cut}: error {msg:?} does not name {expect:?}"
            );
        }
        if cut < data_start {
            assert!(
                msg.contains("truncated") || msg.contains("can hold at most"),
                "cut at {cut}: {msg}"
            );
        }
        checked += 1;
    }
    assert!(checked > 1000, "only {checked} truncations checked");
}

#[test]
fn bad_magic_and_version() {
    let mut b = sample_bytes();
    b[0] = b'X';
    assert_msg(b, &["not a GGUF file", "XGUF"]);
    for v in [0u32, 1, 4, 0x0300_0000] {
        let mut b = sample_bytes();
        put_u32(&mut b, 4, v);
        assert_msg(b, &["unsupported GGUF version", &v.to_string()]);
    }
}

#[test]
fn absurd_counts() {
    let mut b = sample_bytes();
    put_u64(&mut b, 8, u64::MAX);
    assert_msg(
        b,
        &["tensor count is 18446744073709551615", "can hold at most"],
    );
    let mut b = sample_bytes();
    put_u64(&mut b, 16, 1 << 40);
    assert_msg(b, &["metadata kv count is 1099511627776"]);
    // One kv more than there is: the tensor table is misread as a kv and fails somewhere.
    let mut b = sample_bytes();
    let n = get_u64(&b, 16);
    put_u64(&mut b, 16, n + 1);
    err(b);
}

#[test]
fn key_and_string_lengths_past_eof() {
    let mut b = sample_bytes();
    let at = find_gguf_string(&b, "general.name");
    put_u64(&mut b, at, u64::MAX - 3);
    assert_msg(b, &["truncated", "key of metadata entry #2"]);
    let mut b = sample_bytes();
    let at = after_gguf_string(&b, "test.string") + 4;
    put_u64(&mut b, at, 1 << 50);
    assert_msg(b, &["truncated", "value of metadata key \"test.string\""]);
    let mut b = sample_bytes();
    let at = after_gguf_string(&b, "test.string") + 4 + 8;
    b[at] = 0xff;
    assert_msg(b, &["not valid UTF-8", "test.string"]);
}

#[test]
fn bad_value_types() {
    let mut b = sample_bytes();
    let at = after_gguf_string(&b, "llama.block_count");
    put_u32(&mut b, at, 13);
    assert_msg(b, &["unknown value type id 13", "\"llama.block_count\""]);
    let mut b = sample_bytes();
    let at = after_gguf_string(&b, "test.arr_u32") + 4;
    put_u32(&mut b, at, 99);
    assert_msg(
        b,
        &[
            "unknown value type id 99",
            "array item type of metadata key \"test.arr_u32\"",
        ],
    );
    let mut b = sample_bytes();
    let at = after_gguf_string(&b, "test.bool") + 4;
    b[at] = 2;
    assert_msg(b, &["\"test.bool\" is 2", "bool must be 0 or 1"]);
}

#[test]
fn array_lengths_and_nesting() {
    let mut b = sample_bytes();
    let at = after_gguf_string(&b, "tokenizer.ggml.scores") + 4 + 4;
    put_u64(&mut b, at, u64::MAX / 2);
    assert_msg(
        b,
        &[
            "array length of metadata key \"tokenizer.ggml.scores\"",
            "can hold at most",
        ],
    );
    // A nested array whose inner count would need more bytes than the file has.
    let mut b = sample_bytes();
    let at = after_gguf_string(&b, "test.nested") + 4 + 4 + 8 + 4;
    put_u64(&mut b, at, 1 << 60);
    assert_msg(b, &["array length of metadata key \"test.nested\""]);

    // 100 levels of array-in-array, hand-built (the writer refuses them).
    let mut raw = b"GGUF".to_vec();
    raw.extend_from_slice(&3u32.to_le_bytes());
    raw.extend_from_slice(&0u64.to_le_bytes());
    raw.extend_from_slice(&1u64.to_le_bytes());
    raw.extend_from_slice(&4u64.to_le_bytes());
    raw.extend_from_slice(b"deep");
    raw.extend_from_slice(&9u32.to_le_bytes());
    for _ in 0..100 {
        raw.extend_from_slice(&9u32.to_le_bytes());
        raw.extend_from_slice(&1u64.to_le_bytes());
    }
    raw.extend_from_slice(&[0; 64]);
    let e = assert_msg(raw, &["\"deep\"", "nested deeper than 8"]);
    assert!(matches!(e, GgufError::ArrayTooDeep { .. }));
}

#[test]
fn tensor_dims_and_types() {
    let name = "blk.0.ffn_up.weight";
    let cases: Vec<(BytePatch, Vec<String>)> = vec![
        (
            Box::new(|b| {
                let at = tensor_fields(b, name).0;
                put_u32(b, at, 5)
            }),
            vec!["n_dims is 5".into()],
        ),
        (
            Box::new(|b| {
                let at = tensor_fields(b, name).0;
                put_u32(b, at, 0)
            }),
            vec!["n_dims is 0".into()],
        ),
        (
            Box::new(|b| {
                let at = tensor_fields(b, name).1 + 8;
                put_u64(b, at, 0)
            }),
            vec!["dims[1] is 0".into(), "at least 1".into()],
        ),
        (
            Box::new(|b| {
                let at = tensor_fields(b, name).1 + 8;
                put_u64(b, at, u64::MAX)
            }),
            vec!["dims[1]".into(), "int64".into()],
        ),
        (
            Box::new(|b| {
                let at = tensor_fields(b, name).1 + 8;
                put_u64(b, at, 1 << 60)
            }),
            vec!["overflow".into()],
        ),
        (
            Box::new(|b| {
                let at = tensor_fields(b, name).1;
                put_u64(b, at, 48)
            }),
            vec!["dims[0] = 48".into(), "Q4_0 block size 32".into()],
        ),
        (
            Box::new(|b| {
                let at = tensor_fields(b, name).2;
                put_u32(b, at, 1000)
            }),
            vec!["unknown ggml type id 1000".into()],
        ),
        (
            Box::new(|b| {
                let at = tensor_fields(b, name).2;
                put_u32(b, at, 4)
            }),
            vec!["Q4_2 was removed".into()],
        ),
    ];
    for (patch, wanted) in cases {
        let mut b = sample_bytes();
        patch(&mut b);
        let (_, msg) = err(b);
        assert!(msg.contains(&format!("tensor \"{name}\"")), "{msg}");
        for w in wanted {
            assert!(msg.contains(&w), "{msg:?} does not mention {w:?}");
        }
    }
}

#[test]
fn tensor_offsets() {
    let b0 = sample_bytes();
    let g = Gguf::from_bytes(b0.clone()).unwrap();
    let off = |name: &str| g.tensor(name).unwrap().offset;

    // Misaligned (the sample's alignment is 64).
    let mut b = b0.clone();
    let at = tensor_fields(&b, "blk.0.mixed").3;
    put_u64(&mut b, at, off("blk.0.mixed") + 8);
    let e = assert_msg(
        b,
        &[
            "tensor \"blk.0.mixed\"",
            "not a multiple of the alignment 64",
        ],
    );
    assert!(matches!(e, GgufError::MisalignedTensor { .. }));
    // Past EOF, and so large the end overflows.
    for o in [1u64 << 20, u64::MAX - 63] {
        let mut b = b0.clone();
        let at = tensor_fields(&b, "blk.0.mixed").3;
        put_u64(&mut b, at, o);
        assert_msg(
            b,
            &["tensor \"blk.0.mixed\"", "runs past the end of the file"],
        );
    }
    // Overlap: two tensors at the same offset.
    let mut b = b0.clone();
    let at = tensor_fields(&b, "blk.0.ffn_up.weight").3;
    put_u64(&mut b, at, off("blk.0.attn_norm.weight"));
    let e = assert_msg(
        b,
        &["overlaps", "blk.0.ffn_up.weight", "blk.0.attn_norm.weight"],
    );
    assert!(matches!(e, GgufError::TensorOverlap { .. }));
    // Region too short for its type: F32 -> F64 doubles attn_norm into ffn_up's bytes.
    let mut b = b0.clone();
    let at = tensor_fields(&b, "blk.0.attn_norm.weight").2;
    put_u32(&mut b, at, GgmlType::F64.id());
    assert_msg(
        b,
        &[
            "tensor \"blk.0.attn_norm.weight\" (data ends at",
            "overlaps tensor \"blk.0.ffn_up.weight\"",
        ],
    );
    // ... and the last tensor grown past the end of the file.
    let mut b = b0.clone();
    let at = tensor_fields(&b, "output.weight").2;
    put_u32(&mut b, at, GgmlType::Q8_K.id());
    assert_msg(b, &["tensor \"output.weight\"", "runs past the end"]);
}

#[test]
fn bad_alignment() {
    for a in [0u32, 48, 3] {
        let mut b = sample_bytes();
        let at = after_gguf_string(&b, "general.alignment") + 4;
        put_u32(&mut b, at, a);
        let e = assert_msg(b, &[&format!("general.alignment is {a}"), "power of two"]);
        assert!(matches!(e, GgufError::BadAlignment(_)));
    }
    let mut b = sample_bytes();
    let at = after_gguf_string(&b, "general.alignment");
    put_u32(&mut b, at, 5); // i32, same size as u32
    assert_msg(b, &["\"general.alignment\" has type i32, expected u32"]);
}

#[test]
fn duplicate_keys_and_tensors() {
    let b = sample_writer_with(|m| {
        m.push(("dup.aaa", 1u32.into()));
        m.push(("dup.aab", 2u32.into()));
    })
    .to_bytes()
    .unwrap();
    let mut b2 = b.clone();
    let at = find_unique(&b2, b"dup.aab");
    b2[at + 6] = b'a';
    let e = assert_msg(b2, &["duplicate metadata key \"dup.aaa\""]);
    assert!(matches!(e, GgufError::DuplicateKey(_)));

    // Two tensor names that differ in one byte, then made equal.
    let mut w = strata::gguf::GgufWriter::new();
    w.add_f32_tensor("t.aaa", &[1], &[1.0]).unwrap();
    w.add_f32_tensor("t.aab", &[1], &[2.0]).unwrap();
    let mut b = w.to_bytes().unwrap();
    let at = find_unique(&b, b"t.aab");
    b[at + 4] = b'a';
    let e = assert_msg(b, &["duplicate tensor name \"t.aaa\""]);
    assert!(matches!(e, GgufError::DuplicateTensor(_)));
}

#[test]
fn vocabulary_inconsistencies() {
    let with = |key: &'static str, v: Value| {
        sample_writer_with(move |m| {
            m.iter_mut()
                .find(|(k, _)| *k == key)
                .expect("key in sample")
                .1 = v;
        })
        .to_bytes()
        .unwrap()
    };
    assert_msg(
        with("tokenizer.ggml.scores", vec![0.0f32; 7].into()),
        &["tokenizer.ggml.scores has 7 entries but tokenizer.ggml.tokens has 8"],
    );
    assert_msg(
        with("tokenizer.ggml.token_type", vec![1i32; 9].into()),
        &["tokenizer.ggml.token_type has 9 entries but tokenizer.ggml.tokens has 8"],
    );
    assert_msg(
        with("tokenizer.ggml.bos_token_id", 8u32.into()),
        &["tokenizer.ggml.bos_token_id = 8 is out of range (the vocabulary has 8 tokens)"],
    );
    assert_msg(
        with("tokenizer.ggml.eos_token_id", (-2i32).into()),
        &["tokenizer.ggml.eos_token_id", "out of range"],
    );
    // -1 (as i32 or u32::MAX) is llama.cpp's "no such token", not an error.
    for none in [Value::from(-1i32), Value::from(u32::MAX)] {
        let bytes = with("tokenizer.ggml.eos_token_id", none);
        assert!(
            Gguf::from_bytes(bytes).is_ok(),
            "-1 token id must be accepted as none"
        );
    }
    assert_msg(
        with("tokenizer.ggml.eos_token_id", "2".into()),
        &["tokenizer.ggml.eos_token_id\" has type string"],
    );
    assert_msg(
        with("tokenizer.ggml.tokens", vec![1i32; 8].into()),
        &["\"tokenizer.ggml.tokens\" has type array[i32], expected array[string]"],
    );
    assert_msg(
        with("tokenizer.ggml.scores", vec![0i32; 8].into()),
        &["\"tokenizer.ggml.scores\" has type array[i32], expected array[f32]"],
    );
    assert_msg(
        with("tokenizer.ggml.merges", 3u32.into()),
        &["\"tokenizer.ggml.merges\" has type u32, expected array[string]"],
    );
}

/// Hyper-parameter problems are reported by `HParams::from_gguf`, naming the key.
#[test]
fn hyper_parameter_errors() {
    let hp_err = |edit: MetaEdit| -> String {
        let b = sample_writer_with(edit).to_bytes().unwrap();
        let g = Gguf::from_bytes(b).expect("file itself is valid");
        HParams::from_gguf(&g)
            .expect_err("bad hyper-parameters accepted")
            .to_string()
    };
    let set = |key: &'static str, v: Value| -> MetaEdit {
        Box::new(move |m| m.iter_mut().find(|(k, _)| *k == key).unwrap().1 = v)
    };
    let remove =
        |key: &'static str| -> MetaEdit { Box::new(move |m| m.retain(|(k, _)| *k != key)) };
    let cases: Vec<(MetaEdit, &str)> = vec![
        (
            remove("llama.block_count"),
            "metadata key \"llama.block_count\" is missing",
        ),
        (
            set("llama.block_count", 1.0f32.into()),
            "\"llama.block_count\" has type f32, expected u32",
        ),
        (
            set("llama.block_count", (-1i32).into()),
            "\"llama.block_count\" has value -1: does not fit in u32",
        ),
        (
            set("llama.attention.head_count", 0u32.into()),
            "\"llama.attention.head_count\" has value 0",
        ),
        (
            set("llama.attention.head_count_kv", 3u32.into()),
            "head_count_kv\" has value 3: does not divide head_count 4",
        ),
        (
            set("llama.attention.layer_norm_rms_epsilon", (-1.0f32).into()),
            "layer_norm_rms_epsilon\" has value -1",
        ),
        (
            remove("llama.attention.layer_norm_rms_epsilon"),
            "\"llama.attention.layer_norm_rms_epsilon\" is missing",
        ),
        (
            set("llama.embedding_length", 32u32.into()),
            "tensor \"token_embd.weight\": dims [64, 8], expected [embedding_length 32",
        ),
        (
            set("general.architecture", "mamba".into()),
            "general.architecture \"mamba\" is not supported",
        ),
        (
            remove("general.architecture"),
            "\"general.architecture\" is missing",
        ),
        (
            Box::new(|m: &mut Vec<(&'static str, Value)>| {
                m.push(("llama.vocab_size", 9u32.into()))
            }),
            "\"llama.vocab_size\" has value 9: but tokenizer.ggml.tokens has 8 entries",
        ),
    ];
    for (edit, wanted) in cases {
        let msg = hp_err(edit);
        assert!(msg.contains(wanted), "{msg:?} does not contain {wanted:?}");
    }
}

#[test]
fn errors_from_open_carry_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.gguf");
    let mut b = sample_bytes();
    b.truncate(100);
    std::fs::write(&path, b).unwrap();
    let msg = Gguf::open(&path).unwrap_err().to_string();
    assert!(
        msg.starts_with(&format!("{}: metadata kv count is 45", path.display())),
        "{msg}"
    );
    let missing = dir.path().join("missing.gguf");
    let msg = Gguf::open(&missing).unwrap_err().to_string();
    assert!(msg.contains("missing.gguf: cannot read"), "{msg}");
}

/// `strata inspect` on broken files: one `strata: <message>` line on stderr and exit code 1.
#[test]
fn inspect_reports_errors_with_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = sample_bytes();
    let at = tensor_fields(&b, "blk.0.mixed").0;
    put_u32(&mut b, at, 7);
    let cases = [
        (b, "tensor \"blk.0.mixed\": n_dims is 7"),
        (b"GGUF\x03\0\0\0".to_vec(), "tensor count"),
    ];
    for (i, (bytes, wanted)) in cases.into_iter().enumerate() {
        let path = dir.path().join(format!("f{i}.gguf"));
        std::fs::write(&path, bytes).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_strata"))
            .arg("inspect")
            .arg(&path)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.starts_with("strata: ") && stderr.contains(wanted),
            "{stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }
    // A structurally valid file whose architecture is unknown: the report is printed, then exit 1.
    let b = sample_writer_with(|m| m[0].1 = "mamba".into())
        .to_bytes()
        .unwrap();
    let path = dir.path().join("mamba.gguf");
    std::fs::write(&path, b).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["inspect", "--tensors"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("blk.0.mixed") && stdout.contains("5 tensors"),
        "{stdout}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("\"mamba\" is not supported"));
}
