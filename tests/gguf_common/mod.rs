//! Shared by the gguf_* tests: a small GGUF built with the writer (metadata of every type,
//! nested arrays, a vocabulary, llama hyper-parameters, tensors of several types), byte-patching
//! helpers, and the comparison against the independent gguf-py reader (scripts/gguf_dump.py).
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

use serde_json::Value as Json;
use strata::gguf::{Array, GgmlType, Gguf, GgufWriter, Value};

pub const TOKENS: [&str; 8] = ["<unk>", "<s>", "</s>", "a", "b", "ab", "Ġa", "é"];

/// Tensors of the sample, in file order: (name, dims, type).
pub fn sample_tensors() -> Vec<(&'static str, Vec<u64>, GgmlType)> {
    vec![
        ("token_embd.weight", vec![64, 8], GgmlType::Q8_0),
        ("blk.0.attn_norm.weight", vec![64], GgmlType::F32),
        ("blk.0.ffn_up.weight", vec![64, 2], GgmlType::Q4_0),
        ("blk.0.mixed", vec![4, 3, 2], GgmlType::F16),
        ("output.weight", vec![256, 1], GgmlType::Q4_K),
    ]
}

/// Deterministic filler bytes, different per tensor.
pub fn filler(seed: usize, n: usize) -> Vec<u8> {
    (0..n).map(|i| ((i * 31 + seed * 17) % 251) as u8).collect()
}

/// The sample's metadata, in file order.
pub fn sample_metadata() -> Vec<(&'static str, Value)> {
    vec![
        ("general.architecture", "llama".into()),
        ("general.alignment", 64u32.into()),
        ("general.name", "sample ✓".into()),
        ("test.u8", 200u8.into()),
        ("test.i8", (-100i8).into()),
        ("test.u16", 60000u16.into()),
        ("test.i16", (-30000i16).into()),
        ("test.u32", 4_000_000_000u32.into()),
        ("test.i32", (-2_000_000_000i32).into()),
        ("test.f32", 1.5f32.into()),
        ("test.bool", true.into()),
        ("test.string", "hello".into()),
        ("test.u64", u64::MAX.into()),
        ("test.i64", i64::MIN.into()),
        ("test.f64", (-0.125f64).into()),
        ("test.arr_u8", vec![1u8, 2, 255].into()),
        ("test.arr_i8", vec![-1i8, 0, 1].into()),
        ("test.arr_u16", vec![7u16, 65535].into()),
        ("test.arr_i16", vec![-7i16, 7].into()),
        ("test.arr_u32", vec![1u32, 2, 3, 4].into()),
        ("test.arr_i32", vec![-5i32, 5].into()),
        ("test.arr_f32", vec![0.5f32, -2.0].into()),
        ("test.arr_bool", vec![true, false, true].into()),
        ("test.arr_string", vec!["x", "", "zz"].into()),
        ("test.arr_u64", vec![u64::MAX, 0].into()),
        ("test.arr_i64", vec![i64::MIN, 3].into()),
        ("test.arr_f64", vec![1e300f64, -1e-300].into()),
        ("test.arr_empty", Vec::<u32>::new().into()),
        (
            "test.nested",
            vec![
                Array::I32(vec![1, 2]),
                Array::I32(vec![3]),
                Array::String(vec!["s".into()]),
            ]
            .into(),
        ),
        ("llama.context_length", 128u32.into()),
        ("llama.embedding_length", 64u32.into()),
        ("llama.block_count", 1u32.into()),
        ("llama.feed_forward_length", 128u32.into()),
        ("llama.attention.head_count", 4u32.into()),
        ("llama.attention.head_count_kv", 2u32.into()),
        ("llama.rope.freq_base", 10000.0f32.into()),
        ("llama.attention.layer_norm_rms_epsilon", 1e-5f32.into()),
        ("tokenizer.ggml.model", "gpt2".into()),
        ("tokenizer.ggml.tokens", TOKENS.to_vec().into()),
        (
            "tokenizer.ggml.scores",
            vec![0.0f32, -1.0, -2.0, -3.0, -4.0, -5.0, -6.0, -7.0].into(),
        ),
        (
            "tokenizer.ggml.token_type",
            vec![2i32, 3, 3, 1, 1, 1, 1, 1].into(),
        ),
        ("tokenizer.ggml.merges", vec!["a b", "Ġ a", "Ã ©"].into()),
        ("tokenizer.ggml.bos_token_id", 1u32.into()),
        ("tokenizer.ggml.eos_token_id", 2u32.into()),
        ("tokenizer.chat_template", "{{ messages }}".into()),
    ]
}

/// A writer holding the sample, with `edit` applied to the metadata list first.
pub fn sample_writer_with(edit: impl FnOnce(&mut Vec<(&'static str, Value)>)) -> GgufWriter {
    let mut meta = sample_metadata();
    edit(&mut meta);
    let mut w = GgufWriter::new();
    for (k, v) in meta {
        w.set(k, v).expect("sample metadata is valid");
    }
    for (i, (name, dims, ty)) in sample_tensors().into_iter().enumerate() {
        let n: u64 = dims.iter().product();
        let bytes = ty.bytes_for(n).expect("sample dims are whole blocks") as usize;
        w.add_tensor(name, &dims, ty, filler(i, bytes))
            .expect("sample tensor is valid");
    }
    w
}

pub fn sample_bytes() -> Vec<u8> {
    sample_writer_with(|_| {})
        .to_bytes()
        .expect("writing to memory")
}

/// Offset of the only occurrence of `needle` in `hay` (panics if absent or repeated: test bug).
pub fn find_unique(hay: &[u8], needle: &[u8]) -> usize {
    let hits: Vec<usize> = hay
        .windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(
        hits.len(),
        1,
        "{:?} occurs {} times",
        String::from_utf8_lossy(needle),
        hits.len()
    );
    hits[0]
}

/// Offset of a GGUF string (u64 length + bytes) holding exactly `s`, i.e. of its length field.
pub fn find_gguf_string(hay: &[u8], s: &str) -> usize {
    let mut needle = (s.len() as u64).to_le_bytes().to_vec();
    needle.extend_from_slice(s.as_bytes());
    find_unique(hay, &needle)
}

/// Offset just past the GGUF string `s` (where a key's value type or a tensor's n_dims is).
pub fn after_gguf_string(hay: &[u8], s: &str) -> usize {
    find_gguf_string(hay, s) + 8 + s.len()
}

pub fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

pub fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

pub fn get_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Offsets of a tensor's info fields: (n_dims, dims[0], type id, data offset).
pub fn tensor_fields(b: &[u8], name: &str) -> (usize, usize, usize, usize) {
    let n_dims_at = after_gguf_string(b, name);
    let n_dims = u32::from_le_bytes(b[n_dims_at..n_dims_at + 4].try_into().unwrap()) as usize;
    let dims_at = n_dims_at + 4;
    let type_at = dims_at + 8 * n_dims;
    (n_dims_at, dims_at, type_at, type_at + 4)
}

// ---- comparison with gguf-py ------------------------------------------------------------

/// Runs scripts/gguf_dump.py (gguf-py's reader) on `path`.
pub fn python_dump(path: &Path) -> Json {
    let python = strata::paths::setup_var("STRATA_PYTHON")
        .expect("STRATA_PYTHON is not set and .strata/env has no entry: run `make setup` first");
    let script = strata::paths::project_root().join("scripts/gguf_dump.py");
    let out = Command::new(&python)
        .arg(&script)
        .arg(path)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
    assert!(
        out.status.success(),
        "gguf_dump.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("gguf_dump.py printed JSON")
}

fn py_type_name(v: &Value) -> &'static str {
    match v {
        Value::U8(_) => "UINT8",
        Value::I8(_) => "INT8",
        Value::U16(_) => "UINT16",
        Value::I16(_) => "INT16",
        Value::U32(_) => "UINT32",
        Value::I32(_) => "INT32",
        Value::F32(_) => "FLOAT32",
        Value::Bool(_) => "BOOL",
        Value::String(_) => "STRING",
        Value::Array(_) => "ARRAY",
        Value::U64(_) => "UINT64",
        Value::I64(_) => "INT64",
        Value::F64(_) => "FLOAT64",
    }
}

fn scalar_eq(v: &Value, j: &Json) -> bool {
    match v {
        Value::F32(x) => j.as_f64() == Some(f64::from(*x)),
        Value::F64(x) => j.as_f64() == Some(*x),
        Value::Bool(x) => j.as_bool() == Some(*x),
        Value::String(s) => j.as_str() == Some(s.as_str()),
        v => match v.as_integer() {
            Some(i) => j.as_i64().map(i128::from).or(j.as_u64().map(i128::from)) == Some(i),
            None => false,
        },
    }
}

/// Compares one array element-wise with gguf-py's list; returns a description of the first
/// difference.
fn array_diff(key: &str, a: &Array, j: &Json) -> Option<String> {
    let Some(list) = j.as_array() else {
        return Some(format!("{key}: gguf-py value is not a list"));
    };
    if list.len() != a.len() {
        return Some(format!(
            "{key}: length {} vs gguf-py {}",
            a.len(),
            list.len()
        ));
    }
    macro_rules! each {
        ($v:expr, $wrap:expr) => {
            for (i, (x, y)) in $v.iter().zip(list).enumerate() {
                if !scalar_eq(&$wrap(x.clone()), y) {
                    return Some(format!("{key}[{i}]: {x:?} vs gguf-py {y}"));
                }
            }
        };
    }
    match a {
        Array::U8(v) => each!(v, Value::U8),
        Array::I8(v) => each!(v, Value::I8),
        Array::U16(v) => each!(v, Value::U16),
        Array::I16(v) => each!(v, Value::I16),
        Array::U32(v) => each!(v, Value::U32),
        Array::I32(v) => each!(v, Value::I32),
        Array::F32(v) => each!(v, Value::F32),
        Array::Bool(v) => each!(v, Value::Bool),
        Array::String(v) => each!(v, Value::String),
        Array::U64(v) => each!(v, Value::U64),
        Array::I64(v) => each!(v, Value::I64),
        Array::F64(v) => each!(v, Value::F64),
        Array::Array(_) => unreachable!("nested arrays are compared by nested_diff"),
    }
    None
}

/// gguf-py 0.19's `contents()` flattens nested arrays into one list, decoding every leaf with
/// the first inner array's type. So: leaf values are compared when all inner arrays share a type,
/// else only the leaf count.
fn nested_diff(key: &str, a: &Array, j: &Json) -> Option<String> {
    fn leaves(a: &Array, out: &mut Vec<Array>) {
        match a {
            Array::Array(v) => v.iter().for_each(|x| leaves(x, out)),
            x => out.push(x.clone()),
        }
    }
    let mut parts = Vec::new();
    leaves(a, &mut parts);
    let n: usize = parts.iter().map(Array::len).sum();
    let list = j.as_array()?;
    if list.len() != n {
        return Some(format!("{key}: {n} leaf values vs gguf-py {}", list.len()));
    }
    if parts
        .windows(2)
        .all(|w| w[0].item_type() == w[1].item_type())
    {
        let mut at = 0;
        for p in &parts {
            let slice = Json::Array(list[at..at + p.len()].to_vec());
            if let Some(d) = array_diff(key, p, &slice) {
                return Some(d);
            }
            at += p.len();
        }
    }
    None
}

/// Asserts strata's reader and gguf-py agree on `g`: header, every key (type and full value),
/// every tensor (type, dims, absolute data offset, byte size). Returns the python dump.
pub fn assert_matches_python(g: &Gguf, path: &Path) -> Json {
    let py = python_dump(path);
    assert_eq!(
        py["version"].as_u64(),
        Some(u64::from(g.version())),
        "version"
    );
    assert_eq!(
        py["kv_count"].as_u64(),
        Some(g.n_metadata() as u64),
        "kv count"
    );
    assert_eq!(
        py["tensor_count"].as_u64(),
        Some(g.tensors().len() as u64),
        "tensor count"
    );
    assert_eq!(py["alignment"].as_u64(), Some(g.alignment()), "alignment");
    if !g.tensors().is_empty() {
        assert_eq!(
            py["data_offset"].as_u64(),
            Some(g.data_offset()),
            "data section offset"
        );
    }
    let meta = py["metadata"].as_object().expect("metadata object");
    assert_eq!(meta.len(), g.n_metadata(), "number of keys");
    let mut diffs = Vec::new();
    for (key, v) in g.metadata() {
        let Some(pj) = meta.get(key) else {
            diffs.push(format!("{key}: missing in gguf-py"));
            continue;
        };
        let ptypes: Vec<&str> = pj["type"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        if ptypes[0] != py_type_name(v) {
            diffs.push(format!(
                "{key}: type {} vs gguf-py {ptypes:?}",
                v.type_name()
            ));
            continue;
        }
        match v {
            Value::Array(a) => {
                // gguf-py records no item type for an empty array.
                let typed = !(a.is_empty() && ptypes.len() == 1);
                if typed && ptypes.get(1).copied() != Some(py_type_name(&first_of(a))) {
                    diffs.push(format!(
                        "{key}: item type {} vs gguf-py {ptypes:?}",
                        a.item_type()
                    ));
                }
                let d = match a {
                    Array::Array(_) => nested_diff(key, a, &pj["value"]),
                    a => array_diff(key, a, &pj["value"]),
                };
                diffs.extend(d);
            }
            v if !scalar_eq(v, &pj["value"]) => {
                diffs.push(format!("{key}: {v} vs gguf-py {}", pj["value"]))
            }
            _ => {}
        }
    }
    let pts = py["tensors"].as_array().expect("tensors list");
    assert_eq!(pts.len(), g.tensors().len());
    for (t, pt) in g.tensors().iter().zip(pts) {
        let name = &t.name;
        assert_eq!(pt["name"].as_str(), Some(name.as_str()), "tensor order");
        if pt["type_id"].as_u64() != Some(u64::from(t.ggml_type.id())) {
            diffs.push(format!(
                "{name}: type {} vs gguf-py {}",
                t.ggml_type, pt["type"]
            ));
        }
        let pdims: Vec<u64> = pt["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap())
            .collect();
        if pdims != t.dims {
            diffs.push(format!("{name}: dims {:?} vs gguf-py {pdims:?}", t.dims));
        }
        if pt["data_offset"].as_u64() != Some(t.file_offset) {
            diffs.push(format!(
                "{name}: offset {} vs gguf-py {}",
                t.file_offset, pt["data_offset"]
            ));
        }
        if pt["n_elements"].as_u64() != Some(t.n_elements) {
            diffs.push(format!(
                "{name}: {} elements vs gguf-py {}",
                t.n_elements, pt["n_elements"]
            ));
        }
        // gguf-py 0.19 sizes Q8_1 with an outdated 40-byte block; ggml's is 36.
        if t.ggml_type != GgmlType::Q8_1 && pt["n_bytes"].as_u64() != Some(t.n_bytes) {
            diffs.push(format!(
                "{name}: {} bytes vs gguf-py {}",
                t.n_bytes, pt["n_bytes"]
            ));
        }
    }
    assert!(
        diffs.is_empty(),
        "{} differences from gguf-py:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
    py
}

/// A value of the array's item type, for naming it.
fn first_of(a: &Array) -> Value {
    match a {
        Array::U8(_) => Value::U8(0),
        Array::I8(_) => Value::I8(0),
        Array::U16(_) => Value::U16(0),
        Array::I16(_) => Value::I16(0),
        Array::U32(_) => Value::U32(0),
        Array::I32(_) => Value::I32(0),
        Array::F32(_) => Value::F32(0.0),
        Array::Bool(_) => Value::Bool(false),
        Array::String(_) => Value::String(String::new()),
        Array::Array(_) => Value::Array(Array::U8(vec![])),
        Array::U64(_) => Value::U64(0),
        Array::I64(_) => Value::I64(0),
        Array::F64(_) => Value::F64(0.0),
    }
}
