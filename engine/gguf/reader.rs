//! Parsing a GGUF file (v2/v3) into typed metadata and a validated tensor table over a memory
//! map. Layout: magic "GGUF", u32 version, u64 tensor count, u64 kv count, the kv pairs, the
//! tensor infos, padding to `general.alignment`, then the data section that tensor offsets are
//! relative to. All multi-byte values are little-endian.
//!
//! Every count and length is checked against the bytes left in the file before it sizes an
//! allocation, and every tensor's extent is checked against the file before any data is touched,
//! so a hostile file costs at most a few times its own size in memory.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::cursor::Cursor;
use super::error::{GgufError, Result};
use super::value::{Array, Value, ValueType};
use super::GgmlType;

pub const GGUF_MAGIC: [u8; 4] = *b"GGUF";
/// Alignment of the data section and of every tensor offset when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// ggml tensors have at most 4 dimensions.
pub const MAX_DIMS: u32 = 4;
/// Arrays of arrays deeper than this are refused (bounds recursion on hostile files).
pub const MAX_ARRAY_DEPTH: usize = 8;

/// One tensor-table entry, validated against the file.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    pub name: String,
    /// ggml order: `dims[0]` (ne[0]) is the contiguous dimension, so a (rows, cols) matrix
    /// stored row-major has `dims == [cols, rows]`. 1 to 4 entries, each non-zero.
    pub dims: Vec<u64>,
    pub ggml_type: GgmlType,
    /// Offset of the data relative to the data section (what the file stores).
    pub offset: u64,
    /// Absolute offset of the data in the file.
    pub file_offset: u64,
    pub n_elements: u64,
    pub n_bytes: u64,
}

impl TensorInfo {
    /// ne[i], with 1 for dimensions past `dims.len()` (ggml's convention).
    pub fn ne(&self, i: usize) -> u64 {
        self.dims.get(i).copied().unwrap_or(1)
    }

    /// Rows of `ne[0]` elements: the product of all dims but the first.
    pub fn n_rows(&self) -> u64 {
        // n_elements / ne[0] is exact and cannot overflow: ne[0] divides the checked product.
        self.n_elements / self.ne(0)
    }

    /// Bytes of one row of `ne[0]` elements.
    pub fn row_bytes(&self) -> u64 {
        self.n_bytes / self.n_rows()
    }
}

enum Backing {
    Mmap(memmap2::Mmap),
    Bytes(Vec<u8>),
}

impl Backing {
    fn bytes(&self) -> &[u8] {
        match self {
            Backing::Mmap(m) => m,
            Backing::Bytes(v) => v,
        }
    }
}

/// An open, fully validated GGUF file. Metadata is decoded up front; tensor data stays in the
/// memory map and is handed out as byte slices.
pub struct Gguf {
    path: Option<PathBuf>,
    backing: Backing,
    version: u32,
    metadata: Vec<(String, Value)>,
    key_index: HashMap<String, usize>,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
    alignment: u64,
    data_offset: u64,
}

impl std::fmt::Debug for Gguf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gguf")
            .field("path", &self.path)
            .field("version", &self.version)
            .field("n_kv", &self.metadata.len())
            .field("n_tensors", &self.tensors.len())
            .finish()
    }
}

impl Gguf {
    /// Maps and validates a file. Errors carry the path.
    pub fn open(path: impl AsRef<Path>) -> Result<Gguf> {
        let path = path.as_ref();
        let inner = || -> Result<Gguf> {
            // Checked before opening: opening a FIFO for reading blocks until a writer comes.
            if !std::fs::metadata(path)?.is_file() {
                let e = std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file");
                return Err(e.into());
            }
            let file = std::fs::File::open(path)?;
            // SAFETY: the map is read-only; if another process truncates or rewrites the file
            // while it is mapped, reads may fault or change. Model files are not modified in
            // place, and this is the same contract as every mmap-based GGUF loader.
            let map = unsafe { memmap2::Mmap::map(&file)? };
            Gguf::parse(Backing::Mmap(map), Some(path.to_path_buf()))
        };
        inner().map_err(|e| e.in_file(path))
    }

    /// Parses and validates an in-memory file (tests, fuzzing, generated models).
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Gguf> {
        Gguf::parse(Backing::Bytes(bytes), None)
    }

    fn parse(backing: Backing, path: Option<PathBuf>) -> Result<Gguf> {
        let parsed = parse_layout(backing.bytes())?;
        Ok(Gguf {
            path,
            backing,
            version: parsed.version,
            metadata: parsed.metadata,
            key_index: parsed.key_index,
            tensors: parsed.tensors,
            tensor_index: parsed.tensor_index,
            alignment: parsed.alignment,
            data_offset: parsed.data_offset,
        })
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }
    pub fn version(&self) -> u32 {
        self.version
    }
    /// `general.alignment`, or 32.
    pub fn alignment(&self) -> u64 {
        self.alignment
    }
    /// Absolute file offset of the data section.
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }
    pub fn file_len(&self) -> u64 {
        self.bytes().len() as u64
    }
    /// The whole file.
    pub fn bytes(&self) -> &[u8] {
        self.backing.bytes()
    }

    /// Metadata in file order.
    pub fn metadata(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.metadata.iter().map(|(k, v)| (k.as_str(), v))
    }
    pub fn n_metadata(&self) -> usize {
        self.metadata.len()
    }
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.key_index.get(key).map(|&i| &self.metadata[i].1)
    }
    pub fn contains_key(&self, key: &str) -> bool {
        self.key_index.contains_key(key)
    }

    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }
    pub fn tensor_info(&self, name: &str) -> Option<&TensorInfo> {
        self.tensor_index.get(name).map(|&i| &self.tensors[i])
    }
    /// The tensor, or an error naming it.
    pub fn tensor(&self, name: &str) -> Result<&TensorInfo> {
        self.tensor_info(name)
            .ok_or_else(|| GgufError::MissingTensor(name.to_string()))
    }
    /// The tensor's data (`n_bytes` long). `info` should come from this file; an entry from
    /// elsewhere that does not fit gives an error rather than a panic.
    pub fn tensor_data(&self, info: &TensorInfo) -> Result<&[u8]> {
        let range = usize::try_from(info.file_offset).ok().and_then(|start| {
            let end = start.checked_add(usize::try_from(info.n_bytes).ok()?)?;
            self.bytes().get(start..end)
        });
        range.ok_or_else(|| GgufError::TensorPastEnd {
            tensor: info.name.clone(),
            start: info.file_offset,
            end: info.file_offset.saturating_add(info.n_bytes),
            file_len: self.file_len(),
        })
    }
    /// The named tensor's data.
    pub fn tensor_bytes(&self, name: &str) -> Result<&[u8]> {
        self.tensor_data(self.tensor(name)?)
    }

    /// `general.architecture`.
    pub fn architecture(&self) -> Result<&str> {
        self.get_str("general.architecture")
    }

    /// Adds this file's path (if any) to an error produced while interpreting it.
    pub fn err_in_file(&self, e: GgufError) -> GgufError {
        match &self.path {
            Some(p) => e.in_file(p),
            None => e,
        }
    }
}

struct Parsed {
    version: u32,
    metadata: Vec<(String, Value)>,
    key_index: HashMap<String, usize>,
    tensors: Vec<TensorInfo>,
    tensor_index: HashMap<String, usize>,
    alignment: u64,
    data_offset: u64,
}

/// Fewest bytes of one kv pair: u64 key length + u32 value type + a 1-byte value.
const MIN_KV_BYTES: u64 = 8 + 4 + 1;
/// Fewest bytes of one tensor info: u64 name length + u32 n_dims + one u64 dim + u32 type + u64 offset.
const MIN_TENSOR_INFO_BYTES: u64 = 8 + 4 + 8 + 4 + 8;

fn parse_layout(buf: &[u8]) -> Result<Parsed> {
    let mut c = Cursor::new(buf);
    let magic = c.take(4, &|| "magic".into())?;
    if magic != GGUF_MAGIC {
        let mut found = [0u8; 4];
        found.copy_from_slice(magic);
        return Err(GgufError::BadMagic { found });
    }
    let version = c.u32(&|| "version".into())?;
    if version != 2 && version != 3 {
        return Err(GgufError::UnsupportedVersion(version));
    }
    let n_tensors = c.u64(&|| "tensor count".into())?;
    let n_kv = c.u64(&|| "metadata kv count".into())?;
    c.check_count(n_kv, MIN_KV_BYTES, &|| "metadata kv count".into())?;
    c.check_count(n_tensors, MIN_TENSOR_INFO_BYTES, &|| "tensor count".into())?;

    // n_kv is bounded by the file size above, so this reservation is too.
    let mut metadata: Vec<(String, Value)> = Vec::with_capacity(n_kv as usize);
    let mut key_index = HashMap::with_capacity(n_kv as usize);
    for i in 0..n_kv {
        let key = c.string(&|| format!("key of metadata entry #{i}"))?;
        let type_field = || format!("value type of metadata key \"{key}\"");
        let type_id = c.u32(&type_field)?;
        let ty = ValueType::from_id(type_id).ok_or_else(|| GgufError::UnknownValueType {
            field: type_field(),
            type_id,
        })?;
        let value = read_value(&mut c, ty, &key, 0)?;
        if key_index.insert(key.clone(), metadata.len()).is_some() {
            return Err(GgufError::DuplicateKey(key));
        }
        metadata.push((key, value));
    }

    let alignment = match key_index.get("general.alignment").map(|&i| &metadata[i].1) {
        None => DEFAULT_ALIGNMENT,
        Some(Value::U32(a)) => {
            let a = u64::from(*a);
            if a == 0 || !a.is_power_of_two() {
                return Err(GgufError::BadAlignment(a));
            }
            a
        }
        Some(v) => {
            return Err(GgufError::WrongType {
                key: "general.alignment".into(),
                expected: "u32".into(),
                actual: v.type_name(),
            })
        }
    };

    c.check_count(n_tensors, MIN_TENSOR_INFO_BYTES, &|| "tensor count".into())?;
    let mut tensors: Vec<TensorInfo> = Vec::with_capacity(n_tensors as usize);
    let mut tensor_index = HashMap::with_capacity(n_tensors as usize);
    for i in 0..n_tensors {
        let info = read_tensor_info(&mut c, i)?;
        if tensor_index
            .insert(info.name.clone(), tensors.len())
            .is_some()
        {
            return Err(GgufError::DuplicateTensor(info.name));
        }
        tensors.push(info);
    }

    let file_len = c.file_len();
    let data_offset = align_up(c.pos(), alignment);
    for t in &mut tensors {
        if t.offset % alignment != 0 {
            return Err(GgufError::MisalignedTensor {
                tensor: t.name.clone(),
                offset: t.offset,
                alignment,
            });
        }
        let past_end = |start: u64, end: u64| GgufError::TensorPastEnd {
            tensor: t.name.clone(),
            start,
            end,
            file_len,
        };
        let start = data_offset
            .checked_add(t.offset)
            .ok_or_else(|| past_end(u64::MAX, u64::MAX))?;
        let end = start
            .checked_add(t.n_bytes)
            .ok_or_else(|| past_end(start, u64::MAX))?;
        if end > file_len {
            return Err(past_end(start, end));
        }
        t.file_offset = start;
    }
    check_overlaps(&tensors)?;

    let parsed = Parsed {
        version,
        metadata,
        key_index,
        tensors,
        tensor_index,
        alignment,
        data_offset,
    };
    super::vocab::check_vocab(&parsed.metadata, &parsed.key_index)?;
    Ok(parsed)
}

fn align_up(pos: u64, alignment: u64) -> u64 {
    // pos is at most the file length and alignment at most 2^31, so this cannot overflow.
    pos.div_ceil(alignment) * alignment
}

fn check_overlaps(tensors: &[TensorInfo]) -> Result<()> {
    let mut order: Vec<&TensorInfo> = tensors.iter().collect();
    order.sort_by_key(|t| t.file_offset);
    for pair in order.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        // a's end was checked not to overflow above.
        let a_end = a.file_offset + a.n_bytes;
        if a_end > b.file_offset {
            return Err(GgufError::TensorOverlap {
                first: a.name.clone(),
                first_end: a_end,
                second: b.name.clone(),
                second_start: b.file_offset,
            });
        }
    }
    Ok(())
}

fn read_tensor_info(c: &mut Cursor<'_>, i: u64) -> Result<TensorInfo> {
    let name = c.string(&|| format!("name of tensor #{i}"))?;
    let n_dims = c.u32(&|| format!("n_dims of tensor \"{name}\""))?;
    if n_dims == 0 || n_dims > MAX_DIMS {
        return Err(GgufError::TooManyDims {
            tensor: name,
            n_dims,
            max: MAX_DIMS,
        });
    }
    let mut dims = Vec::with_capacity(n_dims as usize);
    let mut n_elements: u64 = 1;
    for d in 0..n_dims as usize {
        let ne = c.u64(&|| format!("dims[{d}] of tensor \"{name}\""))?;
        if ne == 0 {
            return Err(GgufError::BadDim {
                tensor: name,
                index: d,
                value: ne,
                reason: "a dimension must be at least 1",
            });
        }
        // ggml stores ne as int64_t.
        if ne > i64::MAX as u64 {
            return Err(GgufError::BadDim {
                tensor: name,
                index: d,
                value: ne,
                reason: "larger than ggml's int64 limit",
            });
        }
        n_elements = match n_elements.checked_mul(ne).filter(|&n| n <= i64::MAX as u64) {
            Some(n) => n,
            None => {
                dims.push(ne);
                let product = dims
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(" x ");
                return Err(GgufError::ElementCountOverflow {
                    tensor: name,
                    n_elements: product,
                });
            }
        };
        dims.push(ne);
    }
    let type_id = c.u32(&|| format!("ggml type of tensor \"{name}\""))?;
    let ggml_type = GgmlType::from_id(type_id).ok_or_else(|| GgufError::UnknownGgmlType {
        tensor: name.clone(),
        type_id,
    })?;
    let (Some(block), Some(_)) = (ggml_type.block_size(), ggml_type.type_size()) else {
        return Err(GgufError::RemovedGgmlType {
            tensor: name,
            ty: ggml_type,
        });
    };
    if dims[0] % block != 0 {
        return Err(GgufError::NotWholeBlocks {
            tensor: name,
            ty: ggml_type,
            ne0: dims[0],
            block,
        });
    }
    let n_bytes =
        ggml_type
            .bytes_for(n_elements)
            .ok_or_else(|| GgufError::ElementCountOverflow {
                tensor: name.clone(),
                n_elements: format!("{n_elements} (as bytes)"),
            })?;
    let offset = c.u64(&|| format!("data offset of tensor \"{name}\""))?;
    Ok(TensorInfo {
        name,
        dims,
        ggml_type,
        offset,
        file_offset: 0,
        n_elements,
        n_bytes,
    })
}

fn read_value(c: &mut Cursor<'_>, ty: ValueType, key: &str, depth: usize) -> Result<Value> {
    let f = || format!("value of metadata key \"{key}\"");
    Ok(match ty {
        ValueType::U8 => Value::U8(c.u8(&f)?),
        ValueType::I8 => Value::I8(c.u8(&f)? as i8),
        ValueType::U16 => Value::U16(c.u16(&f)?),
        ValueType::I16 => Value::I16(c.u16(&f)? as i16),
        ValueType::U32 => Value::U32(c.u32(&f)?),
        ValueType::I32 => Value::I32(c.u32(&f)? as i32),
        ValueType::F32 => Value::F32(f32::from_bits(c.u32(&f)?)),
        ValueType::Bool => Value::Bool(read_bool(c, &f)?),
        ValueType::String => Value::String(c.string(&f)?),
        ValueType::U64 => Value::U64(c.u64(&f)?),
        ValueType::I64 => Value::I64(c.u64(&f)? as i64),
        ValueType::F64 => Value::F64(f64::from_bits(c.u64(&f)?)),
        ValueType::Array => Value::Array(read_array(c, key, depth)?),
    })
}

fn read_bool(c: &mut Cursor<'_>, f: &dyn Fn() -> String) -> Result<bool> {
    match c.u8(f)? {
        0 => Ok(false),
        1 => Ok(true),
        b => Err(GgufError::BadBool {
            field: f(),
            value: b,
        }),
    }
}

fn read_array(c: &mut Cursor<'_>, key: &str, depth: usize) -> Result<Array> {
    if depth >= MAX_ARRAY_DEPTH {
        return Err(GgufError::ArrayTooDeep {
            key: key.to_string(),
            max: MAX_ARRAY_DEPTH,
        });
    }
    let type_field = || format!("array item type of metadata key \"{key}\"");
    let type_id = c.u32(&type_field)?;
    let ty = ValueType::from_id(type_id).ok_or_else(|| GgufError::UnknownValueType {
        field: type_field(),
        type_id,
    })?;
    let len_field = || format!("array length of metadata key \"{key}\"");
    let n = c.u64(&len_field)?;
    c.check_count(n, ty.min_encoded_size(), &len_field)?;
    // n * min_encoded_size <= remaining bytes, so n fits in usize and sizes a bounded allocation.
    let n = n as usize;
    let item = |i: usize| move || format!("item {i} of metadata key \"{key}\"");

    macro_rules! items {
        ($variant:ident, $read:expr) => {{
            let mut v = Vec::with_capacity(n);
            for i in 0..n {
                v.push($read(c, &item(i))?);
            }
            Array::$variant(v)
        }};
    }
    Ok(match ty {
        ValueType::U8 => items!(U8, |c: &mut Cursor<'_>, f: &dyn Fn() -> String| c.u8(f)),
        ValueType::I8 => items!(I8, |c: &mut Cursor<'_>, f: &dyn Fn() -> String| c
            .u8(f)
            .map(|x| x as i8)),
        ValueType::U16 => items!(U16, |c: &mut Cursor<'_>, f: &dyn Fn() -> String| c.u16(f)),
        ValueType::I16 => items!(I16, |c: &mut Cursor<'_>, f: &dyn Fn() -> String| c
            .u16(f)
            .map(|x| x as i16)),
        ValueType::U32 => items!(U32, |c: &mut Cursor<'_>, f: &dyn Fn() -> String| c.u32(f)),
        ValueType::I32 => items!(I32, |c: &mut Cursor<'_>, f: &dyn Fn() -> String| c
            .u32(f)
            .map(|x| x as i32)),
        ValueType::F32 => items!(F32, |c: &mut Cursor<'_>, f: &dyn Fn() -> String| c
            .u32(f)
            .map(f32::from_bits)),
        ValueType::Bool => items!(
            Bool,
            |c: &mut Cursor<'_>, f: &dyn Fn() -> String| read_bool(c, f)
        ),
        ValueType::String => items!(String, |c: &mut Cursor<'_>, f: &dyn Fn() -> String| c
            .string(f)),
        ValueType::U64 => items!(U64, |c: &mut Cursor<'_>, f: &dyn Fn() -> String| c.u64(f)),
        ValueType::I64 => items!(I64, |c: &mut Cursor<'_>, f: &dyn Fn() -> String| c
            .u64(f)
            .map(|x| x as i64)),
        ValueType::F64 => items!(F64, |c: &mut Cursor<'_>, f: &dyn Fn() -> String| c
            .u64(f)
            .map(f64::from_bits)),
        ValueType::Array => {
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                v.push(read_array(c, key, depth + 1)?);
            }
            Array::Array(v)
        }
    })
}
