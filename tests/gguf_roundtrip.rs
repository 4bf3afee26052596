//! The writer and reader agree with each other and with gguf-py: a file written by `GgufWriter`
//! reads back with every value and tensor intact, and gguf-py reads the same values from it.

mod gguf_common;

use gguf_common::*;
use strata::gguf::{Array, GgmlType, Gguf, GgufWriter, HParams, Value};

#[test]
fn writer_output_reads_back_and_matches_gguf_py() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sample.gguf");
    let n = sample_writer_with(|_| {}).write_file(&path).unwrap();
    assert_eq!(n, std::fs::metadata(&path).unwrap().len());
    let g = Gguf::open(&path).unwrap();
    assert_eq!(g.version(), 3);
    assert_eq!(g.alignment(), 64);
    assert_eq!(g.data_offset() % 64, 0);

    let expected = sample_metadata();
    let got: Vec<(&str, &Value)> = g.metadata().collect();
    assert_eq!(got.len(), expected.len());
    for ((k, v), (ek, ev)) in got.iter().zip(&expected) {
        assert_eq!(k, ek);
        assert_eq!(*v, ev, "{k}");
    }
    for (i, (name, dims, ty)) in sample_tensors().into_iter().enumerate() {
        let t = g.tensor(name).unwrap();
        assert_eq!((&t.dims, t.ggml_type), (&dims, ty), "{name}");
        assert_eq!(t.file_offset % 64, 0, "{name} alignment");
        let data = g.tensor_data(t).unwrap();
        assert_eq!(data, filler(i, data.len()).as_slice(), "{name} data");
        assert_eq!(
            data.len() as u64,
            ty.bytes_for(dims.iter().product()).unwrap()
        );
    }
    assert_eq!(g.tensor("blk.0.mixed").unwrap().n_rows(), 6);
    assert_eq!(g.tensor("blk.0.ffn_up.weight").unwrap().row_bytes(), 36);

    // Typed accessors, including integer widening and exact float/string types.
    assert_eq!(g.get_u32("llama.block_count").unwrap(), 1);
    assert_eq!(g.get_u64("test.u8").unwrap(), 200);
    assert_eq!(g.get_i64("test.i64").unwrap(), i64::MIN);
    assert_eq!(g.get_f64("test.f32").unwrap(), 1.5);
    assert_eq!(g.get_str_array("tokenizer.ggml.tokens").unwrap(), TOKENS);
    assert_eq!(g.get_i32_array("test.arr_i32").unwrap(), [-5, 5]);
    assert!(matches!(g.get_array("test.nested").unwrap(), Array::Array(v) if v.len() == 3));
    assert_eq!(g.opt_u32("no.such.key").unwrap(), None);

    let h = HParams::from_gguf(&g).unwrap();
    assert_eq!(
        (h.head_count, h.head_count_kv, h.key_length, h.vocab_size),
        (4, 2, 16, 8)
    );
    assert_eq!(h.rope_dimension_count, 16);

    assert_matches_python(&g, &path);
}

#[test]
fn version_2_and_default_alignment() {
    let mut w = GgufWriter::new();
    w.set_version(2).unwrap();
    w.set("a", 1u32).unwrap();
    w.add_f32_tensor("t", &[3], &[1.0, 2.0, 3.0]).unwrap();
    w.add_f32_tensor("u", &[1], &[4.0]).unwrap();
    let g = Gguf::from_bytes(w.to_bytes().unwrap()).unwrap();
    assert_eq!((g.version(), g.alignment()), (2, 32));
    assert_eq!(g.tensor("u").unwrap().offset, 32);
    assert_eq!(g.tensor_bytes("u").unwrap(), 4.0f32.to_le_bytes());
}

#[test]
fn empty_file_has_no_tensors() {
    let g = Gguf::from_bytes(GgufWriter::new().to_bytes().unwrap()).unwrap();
    assert_eq!((g.n_metadata(), g.tensors().len()), (0, 0));
    assert_eq!(g.file_len(), 24);
}

#[test]
fn writer_refuses_invalid_input() {
    let mut w = GgufWriter::new();
    w.set("k", 1u8).unwrap();
    let msg =
        |r: Result<&mut GgufWriter, strata::gguf::GgufError>| r.err().expect("refused").to_string();
    assert!(msg(w.set("k", 2u8)).contains("duplicate metadata key \"k\""));
    assert!(msg(w.set("general.alignment", 48u32)).contains("general.alignment"));
    assert!(msg(w.set("general.alignment", 64u64)).contains("general.alignment"));
    assert!(msg(w.add_tensor("t", &[33], GgmlType::Q4_0, vec![0; 18])).contains("block size 32"));
    assert!(msg(w.add_tensor("t", &[32], GgmlType::Q4_0, vec![0; 17])).contains("needs Some(18)"));
    assert!(msg(w.add_tensor("t", &[0], GgmlType::F32, vec![])).contains("non-zero"));
    assert!(msg(w.add_tensor("t", &[1, 1, 1, 1, 1], GgmlType::F32, vec![0; 4])).contains("1 to 4"));
    assert!(msg(w.add_tensor("t", &[32], GgmlType::Q4_2, vec![0; 18])).contains("removed"));
    w.add_tensor("t", &[32], GgmlType::Q4_0, vec![0; 18])
        .unwrap();
    assert!(msg(w.add_tensor("t", &[32], GgmlType::Q4_0, vec![0; 18])).contains("duplicate tensor"));
    let mut deep = Array::U8(vec![1]);
    for _ in 0..strata::gguf::MAX_ARRAY_DEPTH {
        deep = Array::Array(vec![deep]);
    }
    assert!(msg(w.set("deep", deep)).contains("nested deeper"));
    assert!(w.set_version(4).is_err());
}

/// Every ggml type's block geometry against gguf-py's table (GGML_QUANT_SIZES).
#[test]
fn ggml_type_table_matches_gguf_py() {
    let python = strata::paths::setup_var("STRATA_PYTHON")
        .expect("STRATA_PYTHON is not set and .strata/env has no entry: run `make setup` first");
    let code = "import json\nfrom gguf.constants import GGML_QUANT_SIZES as S\n\
                print(json.dumps({t.name: [t.value, b, s] for t, (b, s) in S.items()}))";
    let out = std::process::Command::new(&python)
        .args(["-c", code])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let py: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&out.stdout).unwrap();
    let mut compared = 0;
    for (name, v) in &py {
        let ty =
            GgmlType::from_name(name).unwrap_or_else(|| panic!("gguf-py type {name} unknown here"));
        assert_eq!(u64::from(ty.id()), v[0].as_u64().unwrap(), "{name} id");
        assert_eq!(ty.block_size(), v[1].as_u64(), "{name} block size");
        if ty == GgmlType::Q8_1 {
            // gguf-py keeps the old f32 d/s layout (40); ggml's block_q8_1 is 2 x f16 + 32 (36).
            assert_eq!((ty.type_size(), v[2].as_u64()), (Some(36), Some(40)));
        } else {
            assert_eq!(ty.type_size(), v[2].as_u64(), "{name} bytes per block");
        }
        compared += 1;
    }
    // Every supported type is in gguf-py's table; the removed ids are not.
    let supported = GgmlType::all().filter(|t| t.is_supported()).count();
    assert_eq!(compared, supported);
}
