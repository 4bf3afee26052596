//! A bounds-checked little-endian reader over the file bytes. Every read checks the remaining
//! length first and reports the field it was reading, so truncation at any offset is an error
//! naming that field. Field names are built lazily (closures) because the vocabulary alone has
//! hundreds of thousands of strings.

use super::error::{GgufError, Result};

pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, pos: 0 }
    }

    pub fn pos(&self) -> u64 {
        self.pos as u64
    }

    pub fn remaining(&self) -> u64 {
        (self.buf.len() - self.pos) as u64
    }

    pub fn file_len(&self) -> u64 {
        self.buf.len() as u64
    }

    pub fn take(&mut self, n: u64, field: &dyn Fn() -> String) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(GgufError::Truncated {
                field: field(),
                offset: self.pos(),
                need: n,
                file_len: self.file_len(),
            });
        }
        // n <= remaining <= usize::MAX, so the cast and the addition cannot overflow.
        let start = self.pos;
        self.pos += n as usize;
        Ok(&self.buf[start..self.pos])
    }

    fn array<const N: usize>(&mut self, field: &dyn Fn() -> String) -> Result<[u8; N]> {
        let bytes = self.take(N as u64, field)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    pub fn u8(&mut self, field: &dyn Fn() -> String) -> Result<u8> {
        Ok(self.array::<1>(field)?[0])
    }
    pub fn u16(&mut self, field: &dyn Fn() -> String) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array(field)?))
    }
    pub fn u32(&mut self, field: &dyn Fn() -> String) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(field)?))
    }
    pub fn u64(&mut self, field: &dyn Fn() -> String) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(field)?))
    }

    /// A GGUF string: u64 byte length, then UTF-8 bytes (no terminator).
    pub fn string(&mut self, field: &dyn Fn() -> String) -> Result<String> {
        let len = self.u64(&|| format!("length of {}", field()))?;
        let bytes = self.take(len, field)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_string()),
            Err(e) => Err(GgufError::InvalidUtf8 {
                field: field(),
                valid_up_to: e.valid_up_to(),
            }),
        }
    }

    /// Checks that `count` items of at least `min_size` bytes each fit in the rest of the file,
    /// before anything sized by `count` is allocated.
    pub fn check_count(&self, count: u64, min_size: u64, field: &dyn Fn() -> String) -> Result<()> {
        let max = self.remaining() / min_size.max(1);
        if count > max {
            return Err(GgufError::CountTooLarge {
                field: field(),
                count,
                remaining: self.remaining(),
                max,
            });
        }
        Ok(())
    }
}
