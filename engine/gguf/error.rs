//! The one error type of the GGUF reader, writer and hyper-parameter checks. Every variant names
//! the field, key or tensor at fault, so a user can tell what is wrong with their file.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    /// Wraps any other error with the file it came from (added by `Gguf::open`).
    // `error` is not named `source` on purpose: the message already includes it, and a source
    // would make `{:#}` chains print it twice.
    #[error("{}: {error}", path.display())]
    InFile {
        path: PathBuf,
        error: Box<GgufError>,
    },

    #[error("cannot read: {0}")]
    Io(std::io::Error),

    #[error("truncated file: {field} needs {need} bytes at offset {offset} but the file is {file_len} bytes long")]
    Truncated {
        field: String,
        offset: u64,
        need: u64,
        file_len: u64,
    },

    #[error("not a GGUF file: the magic is \"{}\", expected \"GGUF\"", found.escape_ascii())]
    BadMagic { found: [u8; 4] },

    #[error("unsupported GGUF version {0} (this reader handles versions 2 and 3)")]
    UnsupportedVersion(u32),

    /// A count (tensors, keys, array elements) larger than the rest of the file could encode.
    #[error("{field} is {count}, but the remaining {remaining} bytes can hold at most {max} (truncated file or corrupt count)")]
    CountTooLarge {
        field: String,
        count: u64,
        remaining: u64,
        max: u64,
    },

    #[error("{field} is not valid UTF-8 (at byte {valid_up_to} of the string)")]
    InvalidUtf8 { field: String, valid_up_to: usize },

    #[error("{field} has unknown value type id {type_id}")]
    UnknownValueType { field: String, type_id: u32 },

    #[error("metadata key \"{key}\": arrays nested deeper than {max} levels")]
    ArrayTooDeep { key: String, max: usize },

    #[error("{field} is {value}: a bool must be 0 or 1")]
    BadBool { field: String, value: u8 },

    #[error("duplicate metadata key \"{0}\"")]
    DuplicateKey(String),

    #[error("metadata key \"{key}\" is missing")]
    MissingKey { key: String },

    #[error("metadata key \"{key}\" has type {actual}, expected {expected}")]
    WrongType {
        key: String,
        expected: String,
        actual: String,
    },

    #[error("metadata key \"{key}\" has value {value}: {reason}")]
    BadValue {
        key: String,
        value: String,
        reason: String,
    },

    #[error("general.alignment is {0}: it must be a non-zero power of two")]
    BadAlignment(u64),

    #[error("tensor \"{tensor}\": n_dims is {n_dims}, at most {max} are allowed")]
    TooManyDims {
        tensor: String,
        n_dims: u32,
        max: u32,
    },

    #[error("tensor \"{tensor}\": dims[{index}] is {value}: {reason}")]
    BadDim {
        tensor: String,
        index: usize,
        value: u64,
        reason: &'static str,
    },

    #[error("tensor \"{tensor}\": unknown ggml type id {type_id}")]
    UnknownGgmlType { tensor: String, type_id: u32 },

    #[error("tensor \"{tensor}\": ggml type {ty} was removed from ggml and is not supported")]
    RemovedGgmlType { tensor: String, ty: super::GgmlType },

    #[error("tensor \"{tensor}\": {n_elements} elements overflow a 64-bit count")]
    ElementCountOverflow { tensor: String, n_elements: String },

    #[error(
        "tensor \"{tensor}\": dims[0] = {ne0} is not a multiple of the {ty} block size {block}"
    )]
    NotWholeBlocks {
        tensor: String,
        ty: super::GgmlType,
        ne0: u64,
        block: u64,
    },

    #[error(
        "tensor \"{tensor}\": data offset {offset} is not a multiple of the alignment {alignment}"
    )]
    MisalignedTensor {
        tensor: String,
        offset: u64,
        alignment: u64,
    },

    #[error("tensor \"{tensor}\": data [{start}, {end}) runs past the end of the file ({file_len} bytes)")]
    TensorPastEnd {
        tensor: String,
        start: u64,
        end: u64,
        file_len: u64,
    },

    #[error("tensor \"{first}\" (data ends at {first_end}) overlaps tensor \"{second}\" (data starts at {second_start})")]
    TensorOverlap {
        first: String,
        first_end: u64,
        second: String,
        second_start: u64,
    },

    #[error("duplicate tensor name \"{0}\"")]
    DuplicateTensor(String),

    #[error("tensor \"{0}\" is missing")]
    MissingTensor(String),

    #[error("tensor \"{tensor}\": {reason}")]
    BadTensor { tensor: String, reason: String },

    #[error("vocabulary: {key} has {len} entries but tokenizer.ggml.tokens has {n_vocab}")]
    VocabLength { key: String, len: u64, n_vocab: u64 },

    #[error("vocabulary: {key} = {id} is out of range (the vocabulary has {n_vocab} tokens)")]
    TokenIdOutOfRange { key: String, id: u64, n_vocab: u64 },

    #[error("general.architecture \"{0}\" is not supported (supported: {1})")]
    UnsupportedArchitecture(String, String),

    /// Misuse of the writer (duplicate names, data of the wrong length, ...).
    #[error("GGUF writer: {0}")]
    Writer(String),
}

impl GgufError {
    /// Attaches the file path, unless one is attached already.
    pub fn in_file(self, path: impl Into<PathBuf>) -> GgufError {
        match self {
            e @ GgufError::InFile { .. } => e,
            e => GgufError::InFile {
                path: path.into(),
                error: Box::new(e),
            },
        }
    }

    /// The error without its file wrapper (for matching on the variant).
    pub fn kind(&self) -> &GgufError {
        match self {
            GgufError::InFile { error, .. } => error.kind(),
            e => e,
        }
    }
}

impl From<std::io::Error> for GgufError {
    fn from(e: std::io::Error) -> Self {
        GgufError::Io(e)
    }
}

pub type Result<T, E = GgufError> = std::result::Result<T, E>;
