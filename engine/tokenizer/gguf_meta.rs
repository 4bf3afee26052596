//! A minimal, private GGUF reader: header + metadata key/values only, enough to build a
//! [`TokenizerSpec`]. Every length is checked against the bytes left in the file before anything
//! is allocated. (The engine's full GGUF reader will replace this; keep the interface narrow:
//! `TokenizerSpec::from_gguf_path`.)

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use super::error::TokenizerError;
use super::spec::TokenizerSpec;

/// One metadata value, reduced to what the tokenizer reads.
#[derive(Debug)]
enum Val {
    Int(i64),
    Float,
    Bool(bool),
    Str(Vec<u8>),
    ArrStr(Vec<Vec<u8>>),
    ArrF32(Vec<f32>),
    ArrI32(Vec<i32>),
    /// Arrays and values of other types: skipped, only the type is remembered.
    Other,
}

struct Cursor<R: Read> {
    r: R,
    path: PathBuf,
    /// Bytes left in the file: every length read is checked against it.
    left: u64,
}

impl<R: Read> Cursor<R> {
    fn err(&self, msg: impl Into<String>) -> TokenizerError {
        TokenizerError::Gguf {
            path: self.path.clone(),
            msg: msg.into(),
        }
    }

    fn bytes(&mut self, n: u64, what: &str) -> Result<Vec<u8>, TokenizerError> {
        if n > self.left {
            return Err(self.err(format!(
                "{what}: length {n} exceeds the {} bytes left in the file",
                self.left
            )));
        }
        let mut buf = vec![0u8; n as usize];
        self.r
            .read_exact(&mut buf)
            .map_err(|e| self.err(format!("{what}: {e}")))?;
        self.left -= n;
        Ok(buf)
    }

    fn skip(&mut self, n: u64, what: &str) -> Result<(), TokenizerError> {
        if n > self.left {
            return Err(self.err(format!(
                "{what}: length {n} exceeds the {} bytes left in the file",
                self.left
            )));
        }
        let copied = std::io::copy(&mut (&mut self.r).take(n), &mut std::io::sink())
            .map_err(|e| self.err(format!("{what}: {e}")))?;
        if copied != n {
            return Err(self.err(format!("{what}: truncated")));
        }
        self.left -= n;
        Ok(())
    }

    fn arr<const N: usize>(&mut self, what: &str) -> Result<[u8; N], TokenizerError> {
        let v = self.bytes(N as u64, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(&v);
        Ok(a)
    }
    fn u32(&mut self, what: &str) -> Result<u32, TokenizerError> {
        Ok(u32::from_le_bytes(self.arr(what)?))
    }
    fn u64(&mut self, what: &str) -> Result<u64, TokenizerError> {
        Ok(u64::from_le_bytes(self.arr(what)?))
    }
    fn string(&mut self, what: &str) -> Result<Vec<u8>, TokenizerError> {
        let n = self.u64(what)?;
        self.bytes(n, what)
    }

    /// Size in bytes of a fixed-size scalar type, `None` for string/array.
    fn scalar_size(ty: u32) -> Option<u64> {
        match ty {
            0 | 1 | 7 => Some(1),
            2 | 3 => Some(2),
            4..=6 => Some(4),
            10..=12 => Some(8),
            _ => None,
        }
    }

    fn scalar(&mut self, ty: u32, what: &str) -> Result<Val, TokenizerError> {
        Ok(match ty {
            0 => Val::Int(self.arr::<1>(what)?[0] as i64),
            1 => Val::Int(self.arr::<1>(what)?[0] as i8 as i64),
            2 => Val::Int(u16::from_le_bytes(self.arr(what)?) as i64),
            3 => Val::Int(i16::from_le_bytes(self.arr(what)?) as i64),
            4 => Val::Int(self.u32(what)? as i64),
            5 => Val::Int(i32::from_le_bytes(self.arr(what)?) as i64),
            6 => {
                self.arr::<4>(what)?;
                Val::Float
            }
            7 => Val::Bool(self.arr::<1>(what)?[0] != 0),
            10 => Val::Int(self.u64(what)? as i64),
            11 => Val::Int(i64::from_le_bytes(self.arr(what)?)),
            12 => {
                self.arr::<8>(what)?;
                Val::Float
            }
            8 => Val::Str(self.string(what)?),
            _ => return Err(self.err(format!("{what}: unknown value type {ty}"))),
        })
    }

    fn value(&mut self, ty: u32, key: &str, keep: bool) -> Result<Val, TokenizerError> {
        if ty != 9 {
            if !keep {
                match Self::scalar_size(ty) {
                    Some(n) => self.skip(n, key)?,
                    None if ty == 8 => {
                        let n = self.u64(key)?;
                        self.skip(n, key)?
                    }
                    None => return Err(self.err(format!("key `{key}`: unknown value type {ty}"))),
                }
                return Ok(Val::Other);
            }
            return self.scalar(ty, key);
        }
        let ety = self.u32(key)?;
        let count = self.u64(key)?;
        // Each element takes at least its scalar size (8 for a string length, 12 for a nested
        // array header): reject counts the file cannot hold before reserving memory.
        let min = Self::scalar_size(ety).unwrap_or(if ety == 9 { 12 } else { 8 });
        if count.saturating_mul(min) > self.left {
            return Err(self.err(format!(
                "key `{key}`: array of {count} elements exceeds the file size"
            )));
        }
        match (ety, keep) {
            (8, true) => {
                let mut v = Vec::with_capacity(count as usize);
                for _ in 0..count {
                    v.push(self.string(key)?);
                }
                Ok(Val::ArrStr(v))
            }
            (6, true) => {
                let raw = self.bytes(count * 4, key)?;
                Ok(Val::ArrF32(
                    raw.chunks_exact(4)
                        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect(),
                ))
            }
            (5, true) => {
                let raw = self.bytes(count * 4, key)?;
                Ok(Val::ArrI32(
                    raw.chunks_exact(4)
                        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect(),
                ))
            }
            _ => {
                for _ in 0..count {
                    self.value(ety, key, false)?;
                }
                Ok(Val::Other)
            }
        }
    }
}

/// Reads the metadata key/values of `path`, keeping `tokenizer.*` and `general.name`.
fn read_kvs(path: &Path) -> Result<HashMap<String, Val>, TokenizerError> {
    let file = File::open(path).map_err(|source| TokenizerError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let len = file
        .metadata()
        .map_err(|source| TokenizerError::Io {
            path: path.to_path_buf(),
            source,
        })?
        .len();
    let mut c = Cursor {
        r: BufReader::with_capacity(1 << 20, file),
        path: path.to_path_buf(),
        left: len,
    };
    let magic = c.arr::<4>("magic")?;
    if &magic != b"GGUF" {
        return Err(c.err(format!("not a GGUF file (magic {magic:02x?})")));
    }
    let version = c.u32("version")?;
    if !(2..=3).contains(&version) {
        return Err(c.err(format!(
            "unsupported GGUF version {version} (supported: 2, 3)"
        )));
    }
    let _n_tensors = c.u64("tensor count")?;
    let n_kv = c.u64("metadata count")?;
    let mut out = HashMap::new();
    for i in 0..n_kv {
        let key = c.string(&format!("metadata key #{i}"))?;
        let key =
            String::from_utf8(key).map_err(|_| c.err(format!("metadata key #{i} is not UTF-8")))?;
        let ty = c.u32(&key)?;
        let keep = key.starts_with("tokenizer.") || key == "general.name";
        let v = c.value(ty, &key, keep)?;
        if keep {
            out.insert(key, v);
        }
    }
    Ok(out)
}

fn bad(key: &str, msg: &str) -> TokenizerError {
    TokenizerError::BadValue {
        key: key.into(),
        msg: msg.into(),
    }
}

fn get_str(kv: &mut HashMap<String, Val>, key: &str) -> Result<Option<String>, TokenizerError> {
    match kv.remove(key) {
        None => Ok(None),
        Some(Val::Str(s)) => String::from_utf8(s)
            .map(Some)
            .map_err(|_| bad(key, "string is not UTF-8")),
        Some(_) => Err(bad(key, "expected a string")),
    }
}

fn get_bool(kv: &mut HashMap<String, Val>, key: &str) -> Result<Option<bool>, TokenizerError> {
    match kv.remove(key) {
        None => Ok(None),
        Some(Val::Bool(b)) => Ok(Some(b)),
        Some(Val::Int(i)) => Ok(Some(i != 0)),
        Some(_) => Err(bad(key, "expected a bool")),
    }
}

fn get_id(kv: &mut HashMap<String, Val>, key: &str) -> Result<Option<u32>, TokenizerError> {
    match kv.remove(key) {
        None => Ok(None),
        // llama.cpp writes -1 (as u32 0xFFFFFFFF or i32 -1) for "no such token".
        Some(Val::Int(i)) if i < 0 || i == u32::MAX as i64 => Ok(None),
        Some(Val::Int(i)) => u32::try_from(i)
            .map(Some)
            .map_err(|_| bad(key, "id out of range")),
        Some(_) => Err(bad(key, "expected an integer token id")),
    }
}

impl TokenizerSpec {
    /// Reads the tokenizer metadata of a GGUF model file.
    pub fn from_gguf_path(path: impl AsRef<Path>) -> Result<TokenizerSpec, TokenizerError> {
        let path = path.as_ref();
        let mut kv = read_kvs(path)?;
        let with_path = |e: TokenizerError| match e {
            TokenizerError::BadValue { key, msg } => TokenizerError::Gguf {
                path: path.into(),
                msg: format!("key `{key}`: {msg}"),
            },
            TokenizerError::MissingKey { key } => TokenizerError::Gguf {
                path: path.into(),
                msg: format!("missing key `{key}`"),
            },
            other => other,
        };
        let model = get_str(&mut kv, "tokenizer.ggml.model")
            .map_err(with_path)?
            .ok_or_else(|| {
                with_path(TokenizerError::MissingKey {
                    key: "tokenizer.ggml.model".into(),
                })
            })?;
        let tokens = match kv.remove("tokenizer.ggml.tokens") {
            Some(Val::ArrStr(v)) => v,
            None => {
                return Err(with_path(TokenizerError::MissingKey {
                    key: "tokenizer.ggml.tokens".into(),
                }))
            }
            Some(_) => {
                return Err(with_path(bad(
                    "tokenizer.ggml.tokens",
                    "expected an array of strings",
                )))
            }
        };
        let scores = match kv.remove("tokenizer.ggml.scores") {
            Some(Val::ArrF32(v)) => Some(v),
            None => None,
            Some(_) => {
                return Err(with_path(bad(
                    "tokenizer.ggml.scores",
                    "expected an array of f32",
                )))
            }
        };
        let token_types = match kv.remove("tokenizer.ggml.token_type") {
            Some(Val::ArrI32(v)) => Some(v),
            None => None,
            Some(_) => {
                return Err(with_path(bad(
                    "tokenizer.ggml.token_type",
                    "expected an array of i32",
                )))
            }
        };
        let merges = match kv.remove("tokenizer.ggml.merges") {
            Some(Val::ArrStr(v)) => Some(
                v.into_iter()
                    .map(String::from_utf8)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|_| with_path(bad("tokenizer.ggml.merges", "a merge is not UTF-8")))?,
            ),
            None => None,
            Some(_) => {
                return Err(with_path(bad(
                    "tokenizer.ggml.merges",
                    "expected an array of strings",
                )))
            }
        };
        let (def_bos, def_space) = TokenizerSpec::default_flags(&model);
        let spec = TokenizerSpec {
            pre: get_str(&mut kv, "tokenizer.ggml.pre").map_err(with_path)?,
            tokens,
            scores,
            token_types,
            merges,
            bos_id: get_id(&mut kv, "tokenizer.ggml.bos_token_id").map_err(with_path)?,
            eos_id: get_id(&mut kv, "tokenizer.ggml.eos_token_id").map_err(with_path)?,
            eot_id: get_id(&mut kv, "tokenizer.ggml.eot_token_id").map_err(with_path)?,
            unk_id: get_id(&mut kv, "tokenizer.ggml.unknown_token_id").map_err(with_path)?,
            pad_id: get_id(&mut kv, "tokenizer.ggml.padding_token_id").map_err(with_path)?,
            add_bos: get_bool(&mut kv, "tokenizer.ggml.add_bos_token")
                .map_err(with_path)?
                .unwrap_or(def_bos),
            add_eos: get_bool(&mut kv, "tokenizer.ggml.add_eos_token")
                .map_err(with_path)?
                .unwrap_or(false),
            add_space_prefix: get_bool(&mut kv, "tokenizer.ggml.add_space_prefix")
                .map_err(with_path)?
                .unwrap_or(def_space),
            chat_template: get_str(&mut kv, "tokenizer.chat_template").map_err(with_path)?,
            name: get_str(&mut kv, "general.name").map_err(with_path)?,
            model,
        };
        spec.validate().map_err(with_path)?;
        Ok(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn kv_str(buf: &mut Vec<u8>, key: &str, val: &str) {
        buf.extend((key.len() as u64).to_le_bytes());
        buf.extend(key.as_bytes());
        buf.extend(8u32.to_le_bytes());
        buf.extend((val.len() as u64).to_le_bytes());
        buf.extend(val.as_bytes());
    }

    fn header(n_kv: u64) -> Vec<u8> {
        let mut b = b"GGUF".to_vec();
        b.extend(3u32.to_le_bytes());
        b.extend(0u64.to_le_bytes());
        b.extend(n_kv.to_le_bytes());
        b
    }

    fn write(bytes: &[u8]) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().expect("temp file");
        f.write_all(bytes).expect("write temp file");
        f
    }

    #[test]
    fn reads_hand_built_header() {
        let mut b = header(3);
        kv_str(&mut b, "tokenizer.ggml.model", "gpt2");
        kv_str(&mut b, "general.architecture", "llama");
        // tokens: array of 2 strings
        let key = "tokenizer.ggml.tokens";
        b.extend((key.len() as u64).to_le_bytes());
        b.extend(key.as_bytes());
        b.extend(9u32.to_le_bytes());
        b.extend(8u32.to_le_bytes());
        b.extend(2u64.to_le_bytes());
        for t in ["a", "bc"] {
            b.extend((t.len() as u64).to_le_bytes());
            b.extend(t.as_bytes());
        }
        let f = write(&b);
        let spec = TokenizerSpec::from_gguf_path(f.path()).expect("valid file");
        assert_eq!(spec.model, "gpt2");
        assert_eq!(spec.tokens, vec![b"a".to_vec(), b"bc".to_vec()]);
        assert!(!spec.add_bos);
    }

    #[test]
    fn rejects_huge_string_length() {
        let mut b = header(1);
        let key = "tokenizer.ggml.model";
        b.extend((key.len() as u64).to_le_bytes());
        b.extend(key.as_bytes());
        b.extend(8u32.to_le_bytes());
        b.extend(u64::MAX.to_le_bytes());
        let f = write(&b);
        let e = TokenizerSpec::from_gguf_path(f.path())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("tokenizer.ggml.model") && e.contains("exceeds"),
            "{e}"
        );
    }

    #[test]
    fn rejects_huge_array_count_and_bad_magic() {
        let mut b = header(1);
        let key = "tokenizer.ggml.tokens";
        b.extend((key.len() as u64).to_le_bytes());
        b.extend(key.as_bytes());
        b.extend(9u32.to_le_bytes());
        b.extend(8u32.to_le_bytes());
        b.extend((1u64 << 60).to_le_bytes());
        let f = write(&b);
        let e = TokenizerSpec::from_gguf_path(f.path())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("array of") && e.contains("tokenizer.ggml.tokens"),
            "{e}"
        );
        let f = write(b"GGML0000");
        let e = TokenizerSpec::from_gguf_path(f.path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a GGUF file"), "{e}");
    }

    #[test]
    fn missing_model_key_is_named() {
        let mut b = header(1);
        kv_str(&mut b, "general.name", "x");
        let f = write(&b);
        let e = TokenizerSpec::from_gguf_path(f.path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("tokenizer.ggml.model"), "{e}");
    }
}
