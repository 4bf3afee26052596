//! Building GGUF files: metadata of every value type (nested arrays included) and tensors,
//! laid out the way llama.cpp and gguf-py lay them out (tensor data in insertion order, each
//! tensor starting on `general.alignment` and padded to it). The writer refuses structurally
//! invalid input (duplicate names, data of the wrong size, bad dims or alignment) but not
//! semantic oddities such as an inconsistent vocabulary, so tests can build those.

use std::collections::HashSet;
use std::io::Write;
use std::path::Path;

use super::error::{GgufError, Result};
use super::reader::{DEFAULT_ALIGNMENT, GGUF_MAGIC, MAX_ARRAY_DEPTH, MAX_DIMS};
use super::value::{Array, Value};
use super::GgmlType;

struct PendingTensor {
    name: String,
    dims: Vec<u64>,
    ggml_type: GgmlType,
    data: Vec<u8>,
}

/// A GGUF file under construction.
pub struct GgufWriter {
    version: u32,
    alignment: u64,
    metadata: Vec<(String, Value)>,
    keys: HashSet<String>,
    tensors: Vec<PendingTensor>,
    names: HashSet<String>,
}

impl Default for GgufWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl GgufWriter {
    /// An empty version-3 file with the default alignment (32).
    pub fn new() -> Self {
        GgufWriter {
            version: 3,
            alignment: DEFAULT_ALIGNMENT,
            metadata: Vec::new(),
            keys: HashSet::new(),
            tensors: Vec::new(),
            names: HashSet::new(),
        }
    }

    /// Writes a version-2 file instead (same layout for little-endian files).
    pub fn set_version(&mut self, version: u32) -> Result<&mut Self> {
        if version != 2 && version != 3 {
            return Err(GgufError::Writer(format!(
                "cannot write GGUF version {version} (2 or 3)"
            )));
        }
        self.version = version;
        Ok(self)
    }

    /// Adds a metadata key. `general.alignment` (u32, power of two) also sets the layout's alignment.
    pub fn set(&mut self, key: impl Into<String>, value: impl Into<Value>) -> Result<&mut Self> {
        let key = key.into();
        let value = value.into();
        if self.keys.contains(&key) {
            return Err(GgufError::Writer(format!(
                "duplicate metadata key \"{key}\""
            )));
        }
        if key == "general.alignment" {
            match value {
                Value::U32(a) if a != 0 && a.is_power_of_two() => self.alignment = u64::from(a),
                ref v => {
                    return Err(GgufError::Writer(format!(
                        "general.alignment must be a power-of-two u32, got {} {v}",
                        v.type_name()
                    )))
                }
            }
        }
        if let Value::Array(a) = &value {
            check_depth(&key, a, 0)?;
        }
        self.keys.insert(key.clone());
        self.metadata.push((key, value));
        Ok(self)
    }

    /// Sets `general.alignment`.
    pub fn set_alignment(&mut self, alignment: u32) -> Result<&mut Self> {
        self.set("general.alignment", alignment)
    }

    /// Adds a tensor. `dims` in ggml order (`dims[0]` contiguous); `data` must be exactly the
    /// type's size for those dims.
    pub fn add_tensor(
        &mut self,
        name: impl Into<String>,
        dims: &[u64],
        ggml_type: GgmlType,
        data: impl Into<Vec<u8>>,
    ) -> Result<&mut Self> {
        let name = name.into();
        let data = data.into();
        let bad = |why: String| Err(GgufError::Writer(format!("tensor \"{name}\": {why}")));
        if self.names.contains(&name) {
            return bad("duplicate tensor name".into());
        }
        if dims.is_empty() || dims.len() > MAX_DIMS as usize || dims.contains(&0) {
            return bad(format!(
                "dims {dims:?} must be 1 to {MAX_DIMS} non-zero sizes"
            ));
        }
        let Some(n_elements) = dims.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d)) else {
            return bad(format!("dims {dims:?} overflow"));
        };
        let Some(block) = ggml_type.block_size() else {
            return bad(format!("{ggml_type} was removed from ggml"));
        };
        if dims[0] % block != 0 {
            return bad(format!(
                "dims[0] = {} is not a multiple of the {ggml_type} block size {block}",
                dims[0]
            ));
        }
        let expected = ggml_type.bytes_for(n_elements);
        if expected != Some(data.len() as u64) {
            return bad(format!(
                "{} data bytes given, {ggml_type} {dims:?} needs {expected:?}",
                data.len()
            ));
        }
        self.names.insert(name.clone());
        self.tensors.push(PendingTensor {
            name,
            dims: dims.to_vec(),
            ggml_type,
            data,
        });
        Ok(self)
    }

    /// Adds an F32 tensor from values.
    pub fn add_f32_tensor(
        &mut self,
        name: impl Into<String>,
        dims: &[u64],
        values: &[f32],
    ) -> Result<&mut Self> {
        let data: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.add_tensor(name, dims, GgmlType::F32, data)
    }

    /// Data offsets (relative to the data section) the tensors will get, in insertion order.
    fn offsets(&self) -> Vec<u64> {
        let mut at = 0u64;
        self.tensors
            .iter()
            .map(|t| {
                let this = at;
                at = pad_to(this + t.data.len() as u64, self.alignment);
                this
            })
            .collect()
    }

    /// Streams the file to `w`; returns the number of bytes written.
    pub fn write_to(&self, w: &mut dyn Write) -> Result<u64> {
        let mut header = Vec::new();
        header.extend_from_slice(&GGUF_MAGIC);
        header.extend_from_slice(&self.version.to_le_bytes());
        header.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        header.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (key, value) in &self.metadata {
            put_string(&mut header, key);
            header.extend_from_slice(&value.value_type().id().to_le_bytes());
            put_value(&mut header, value);
        }
        for (t, offset) in self.tensors.iter().zip(self.offsets()) {
            put_string(&mut header, &t.name);
            header.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                header.extend_from_slice(&d.to_le_bytes());
            }
            header.extend_from_slice(&t.ggml_type.id().to_le_bytes());
            header.extend_from_slice(&offset.to_le_bytes());
        }
        let mut written = header.len() as u64;
        w.write_all(&header)?;
        let zeros = vec![0u8; self.alignment as usize];
        let pad = |w: &mut dyn Write, written: &mut u64| -> Result<()> {
            let n = pad_to(*written, self.alignment) - *written;
            w.write_all(&zeros[..n as usize])?;
            *written += n;
            Ok(())
        };
        if !self.tensors.is_empty() {
            pad(w, &mut written)?;
        }
        for t in &self.tensors {
            w.write_all(&t.data)?;
            written += t.data.len() as u64;
            pad(w, &mut written)?;
        }
        Ok(written)
    }

    /// The whole file in memory.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.write_to(&mut out)?;
        Ok(out)
    }

    /// Writes the file to `path` (errors carry the path).
    pub fn write_file(&self, path: impl AsRef<Path>) -> Result<u64> {
        let path = path.as_ref();
        let inner = || -> Result<u64> {
            let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
            let n = self.write_to(&mut f)?;
            f.flush()?;
            Ok(n)
        };
        inner().map_err(|e| e.in_file(path))
    }
}

fn pad_to(n: u64, alignment: u64) -> u64 {
    n.div_ceil(alignment) * alignment
}

fn check_depth(key: &str, a: &Array, depth: usize) -> Result<()> {
    if depth >= MAX_ARRAY_DEPTH {
        return Err(GgufError::Writer(format!(
            "metadata key \"{key}\": arrays nested deeper than {MAX_ARRAY_DEPTH}"
        )));
    }
    if let Array::Array(inner) = a {
        for x in inner {
            check_depth(key, x, depth + 1)?;
        }
    }
    Ok(())
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::U8(x) => out.push(*x),
        Value::I8(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::Bool(x) => out.push(u8::from(*x)),
        Value::String(s) => put_string(out, s),
        Value::Array(a) => put_array(out, a),
        Value::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
    }
}

fn put_array(out: &mut Vec<u8>, a: &Array) {
    out.extend_from_slice(&a.item_type().id().to_le_bytes());
    out.extend_from_slice(&(a.len() as u64).to_le_bytes());
    macro_rules! le {
        ($v:expr) => {
            for x in $v {
                out.extend_from_slice(&x.to_le_bytes());
            }
        };
    }
    match a {
        Array::U8(v) => out.extend_from_slice(v),
        Array::I8(v) => le!(v),
        Array::U16(v) => le!(v),
        Array::I16(v) => le!(v),
        Array::U32(v) => le!(v),
        Array::I32(v) => le!(v),
        Array::F32(v) => le!(v),
        Array::Bool(v) => out.extend(v.iter().map(|&b| u8::from(b))),
        Array::String(v) => v.iter().for_each(|s| put_string(out, s)),
        Array::Array(v) => v.iter().for_each(|x| put_array(out, x)),
        Array::U64(v) => le!(v),
        Array::I64(v) => le!(v),
        Array::F64(v) => le!(v),
    }
}
