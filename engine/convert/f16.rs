//! `--to f16`: the same model with every quantized matrix widened to F16, as
//! `llama-quantize --allow-requantize IN OUT F16` writes it: each tensor of two or more dims that
//! is stored quantized is dequantized (ggml's formulas, engine/quant/) and rounded to F16 (nearest
//! even); every other tensor and every metadata key is copied as stored, except
//! `general.file_type`, which becomes 1 (MOSTLY_F16).
//!
//! Why: with F16 weights neither llama.cpp nor the engine rounds a matmul input to 8 bits, and
//! those roundings are what make two implementations of a quantized model part by KLD ~0.003
//! (docs/kld.md): on the F16 file the two can be compared without them.

use super::ConvertError;
use crate::gguf::{GgmlType, Gguf, GgufWriter};
use crate::quant::{self, QuantFormat, F16};

/// ggml's LLAMA_FTYPE_MOSTLY_F16.
const FILE_TYPE_F16: u32 = 1;

/// Whether `llama-quantize ... F16` rewrites this tensor: a matrix (2+ dims) stored quantized.
fn widens(t: GgmlType, dims: &[u64]) -> bool {
    dims.len() >= 2 && !matches!(t, GgmlType::F32 | GgmlType::F16)
}

/// The layer `blk.N.` names (-1 for none), as ggml's loader reads it with `sscanf("blk.%d.")`.
fn layer(name: &str) -> i64 {
    let Some(rest) = name.strip_prefix("blk.") else {
        return -1;
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    rest[..digits].parse().unwrap_or(-1)
}

/// The F16 file, ready to write, and how many tensors it holds.
pub fn build(src: &Gguf) -> Result<(GgufWriter, usize), ConvertError> {
    let mut w = GgufWriter::new();
    // in the source's order (general.alignment, if present, sets the writer's alignment too),
    // general.file_type last, where llama-quantize puts it: the same bytes as its file
    for (key, value) in src.metadata() {
        if key != "general.file_type" {
            w.set(key, value.clone())?;
        }
    }
    w.set("general.file_type", FILE_TYPE_F16)?;
    // llama-quantize's order (llama_model_loader's weights map): by layer, the tensors outside
    // any layer first, then by name
    let mut order: Vec<_> = src.tensors().iter().collect();
    order.sort_by(|a, b| (layer(&a.name), &a.name).cmp(&(layer(&b.name), &b.name)));
    let mut f32s = Vec::new();
    for info in order {
        let data = src.tensor_data(info)?;
        if widens(info.ggml_type, &info.dims) {
            f32s.resize(info.n_elements as usize, 0.0);
            quant::dequantize_by_type(info.ggml_type.id(), data, &mut f32s).map_err(|e| {
                ConvertError::Source {
                    file: src
                        .path()
                        .map(|p| p.display().to_string())
                        .unwrap_or_default(),
                    why: format!("tensor {}: {e}", info.name),
                }
            })?;
            w.add_tensor(&info.name, &info.dims, GgmlType::F16, F16::quantize(&f32s)?)?;
        } else {
            w.add_tensor(&info.name, &info.dims, info.ggml_type, data.to_vec())?;
        }
    }
    Ok((w, src.tensors().len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::Value;
    use crate::quant::Q8_0;

    #[test]
    fn tensors_go_in_llama_quantize_order() {
        let mut names = [
            "blk.10.a",
            "token_embd.weight",
            "blk.2.b",
            "blk.2.a",
            "output_norm.weight",
        ];
        names.sort_by(|a, b| (layer(a), a).cmp(&(layer(b), b)));
        assert_eq!(
            names,
            [
                "output_norm.weight",
                "token_embd.weight",
                "blk.2.a",
                "blk.2.b",
                "blk.10.a"
            ]
        );
    }

    #[test]
    fn matrices_widen_vectors_and_metadata_stay() {
        // a (2, 32) Q8_0 matrix of hand-built blocks and a (4) F32 vector
        let mut blk = vec![0u8; 34 * 2];
        blk[0..2].copy_from_slice(&half::f16::from_f32(0.5).to_le_bytes()); // d = 0.5
        blk[2] = 3; // q = 3 -> 1.5
        blk[34..36].copy_from_slice(&half::f16::from_f32(-2.0).to_le_bytes());
        blk[36 + 31] = 0x81; // q = -127 -> 254
        let mut g = GgufWriter::new();
        g.set("general.architecture", "llama").unwrap();
        g.set("general.file_type", 7u32).unwrap();
        g.add_tensor("m.weight", &[32, 2], GgmlType::Q8_0, blk.clone())
            .unwrap();
        g.add_f32_tensor("v.weight", &[4], &[1.0, 2.0, 3.0, 4.0])
            .unwrap();
        let src = Gguf::from_bytes(g.to_bytes().unwrap()).unwrap();
        let (w, n) = build(&src).unwrap();
        assert_eq!(n, 2);
        let out = Gguf::from_bytes(w.to_bytes().unwrap()).unwrap();
        assert_eq!(out.get("general.file_type"), Some(&Value::U32(1)));
        assert_eq!(out.architecture().unwrap(), "llama");
        let m = out.tensor("m.weight").unwrap();
        assert_eq!((m.ggml_type, m.dims.clone()), (GgmlType::F16, vec![32, 2]));
        let mut want = vec![0f32; 64];
        Q8_0::dequantize(&blk, &mut want).unwrap();
        let mut got = vec![0f32; 64];
        F16::dequantize(out.tensor_data(m).unwrap(), &mut got).unwrap();
        assert_eq!(got, want, "every value of these blocks is exact in f16");
        assert_eq!((got[0], got[63]), (1.5, 254.0));
        let v = out.tensor("v.weight").unwrap();
        assert_eq!(v.ggml_type, GgmlType::F32);
        assert_eq!(
            out.tensor_data(v).unwrap(),
            src.tensor_data(src.tensor("v.weight").unwrap()).unwrap()
        );
    }
}
