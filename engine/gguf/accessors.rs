//! Typed metadata accessors. A missing key or a value of the wrong type is an error naming the
//! key and both types. Integer getters accept any integer type whose value fits (converters are
//! not consistent about u32 vs i32 vs u64); float and string getters are exact.

use super::error::{GgufError, Result};
use super::reader::Gguf;
use super::value::{Array, Value};

/// Conversion from a metadata value; `None` means "wrong type".
pub trait FromValue<'a>: Sized {
    /// The expected type, as shown in errors.
    const EXPECTED: &'static str;
    fn from_value(v: &'a Value) -> Option<std::result::Result<Self, String>>;
}

macro_rules! int_from_value {
    ($($t:ty),*) => {$(
        impl<'a> FromValue<'a> for $t {
            const EXPECTED: &'static str = stringify!($t);
            fn from_value(v: &'a Value) -> Option<std::result::Result<Self, String>> {
                let i = v.as_integer()?;
                Some(<$t>::try_from(i).map_err(|_| format!("does not fit in {}", stringify!($t))))
            }
        }
    )*};
}
int_from_value!(u8, u16, u32, u64, i32, i64, usize);

impl<'a> FromValue<'a> for f32 {
    const EXPECTED: &'static str = "f32";
    fn from_value(v: &'a Value) -> Option<std::result::Result<Self, String>> {
        match v {
            Value::F32(x) => Some(Ok(*x)),
            _ => None,
        }
    }
}

impl<'a> FromValue<'a> for f64 {
    const EXPECTED: &'static str = "f64 or f32";
    fn from_value(v: &'a Value) -> Option<std::result::Result<Self, String>> {
        match v {
            Value::F32(x) => Some(Ok(f64::from(*x))),
            Value::F64(x) => Some(Ok(*x)),
            _ => None,
        }
    }
}

impl<'a> FromValue<'a> for bool {
    const EXPECTED: &'static str = "bool";
    fn from_value(v: &'a Value) -> Option<std::result::Result<Self, String>> {
        match v {
            Value::Bool(x) => Some(Ok(*x)),
            _ => None,
        }
    }
}

impl<'a> FromValue<'a> for &'a str {
    const EXPECTED: &'static str = "string";
    fn from_value(v: &'a Value) -> Option<std::result::Result<Self, String>> {
        v.as_str().map(Ok)
    }
}

impl<'a> FromValue<'a> for &'a Array {
    const EXPECTED: &'static str = "array";
    fn from_value(v: &'a Value) -> Option<std::result::Result<Self, String>> {
        v.as_array().map(Ok)
    }
}

macro_rules! slice_from_value {
    ($($t:ty => $variant:ident, $name:literal);* $(;)?) => {$(
        impl<'a> FromValue<'a> for &'a [$t] {
            const EXPECTED: &'static str = $name;
            fn from_value(v: &'a Value) -> Option<std::result::Result<Self, String>> {
                match v {
                    Value::Array(Array::$variant(x)) => Some(Ok(x.as_slice())),
                    _ => None,
                }
            }
        }
    )*};
}
slice_from_value!(
    String => String, "array[string]";
    f32 => F32, "array[f32]";
    i32 => I32, "array[i32]";
    u32 => U32, "array[u32]";
    bool => Bool, "array[bool]";
    u8 => U8, "array[u8]";
    i64 => I64, "array[i64]";
    u64 => U64, "array[u64]";
);

pub(crate) fn convert<'a, T: FromValue<'a>>(key: &str, v: &'a Value) -> Result<T> {
    match T::from_value(v) {
        Some(Ok(x)) => Ok(x),
        Some(Err(reason)) => Err(GgufError::BadValue {
            key: key.to_string(),
            value: v.to_string(),
            reason,
        }),
        None => Err(GgufError::WrongType {
            key: key.to_string(),
            expected: T::EXPECTED.to_string(),
            actual: v.type_name(),
        }),
    }
}

impl Gguf {
    /// The value of `key` as `T`; errors name the key (missing, wrong type, out of range).
    pub fn get_as<'a, T: FromValue<'a>>(&'a self, key: &str) -> Result<T> {
        let v = self.get(key).ok_or_else(|| GgufError::MissingKey {
            key: key.to_string(),
        })?;
        convert(key, v)
    }

    /// Like `get_as`, but a missing key is `Ok(None)` (a present key of the wrong type is still an error).
    pub fn opt_as<'a, T: FromValue<'a>>(&'a self, key: &str) -> Result<Option<T>> {
        self.get(key).map(|v| convert(key, v)).transpose()
    }

    pub fn get_u32(&self, key: &str) -> Result<u32> {
        self.get_as(key)
    }
    pub fn get_u64(&self, key: &str) -> Result<u64> {
        self.get_as(key)
    }
    pub fn get_i64(&self, key: &str) -> Result<i64> {
        self.get_as(key)
    }
    pub fn get_f32(&self, key: &str) -> Result<f32> {
        self.get_as(key)
    }
    pub fn get_f64(&self, key: &str) -> Result<f64> {
        self.get_as(key)
    }
    pub fn get_bool(&self, key: &str) -> Result<bool> {
        self.get_as(key)
    }
    pub fn get_str(&self, key: &str) -> Result<&str> {
        self.get_as(key)
    }
    pub fn get_array(&self, key: &str) -> Result<&Array> {
        self.get_as(key)
    }
    pub fn get_str_array(&self, key: &str) -> Result<&[String]> {
        self.get_as(key)
    }
    pub fn get_f32_array(&self, key: &str) -> Result<&[f32]> {
        self.get_as(key)
    }
    pub fn get_i32_array(&self, key: &str) -> Result<&[i32]> {
        self.get_as(key)
    }
    pub fn opt_u32(&self, key: &str) -> Result<Option<u32>> {
        self.opt_as(key)
    }
    pub fn opt_f32(&self, key: &str) -> Result<Option<f32>> {
        self.opt_as(key)
    }
    pub fn opt_bool(&self, key: &str) -> Result<Option<bool>> {
        self.opt_as(key)
    }
    pub fn opt_str(&self, key: &str) -> Result<Option<&str>> {
        self.opt_as(key)
    }
}
