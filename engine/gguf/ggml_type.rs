//! ggml tensor type ids as stored in a GGUF tensor table, with the block geometry the reader
//! needs to size a tensor's data (the quant formats themselves live in `engine/quant/`).

use std::fmt;

/// Every type id ggml has assigned. Ids 4, 5 (Q4_2, Q4_3) and 31..=33, 36..=38 (the
/// repacked Q4_0_x_y / IQ4_NL_x_y layouts) were removed from ggml; they are kept as variants so a
/// file using them gets a precise "no longer supported" error instead of "unknown".
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GgmlType {
    F32,
    F16,
    Q4_0,
    Q4_1,
    Q4_2,
    Q4_3,
    Q5_0,
    Q5_1,
    Q8_0,
    Q8_1,
    Q2_K,
    Q3_K,
    Q4_K,
    Q5_K,
    Q6_K,
    Q8_K,
    IQ2_XXS,
    IQ2_XS,
    IQ3_XXS,
    IQ1_S,
    IQ4_NL,
    IQ3_S,
    IQ2_S,
    IQ4_XS,
    I8,
    I16,
    I32,
    I64,
    F64,
    IQ1_M,
    BF16,
    Q4_0_4_4,
    Q4_0_4_8,
    Q4_0_8_8,
    TQ1_0,
    TQ2_0,
    IQ4_NL_4_4,
    IQ4_NL_4_8,
    IQ4_NL_8_8,
    MXFP4,
    NVFP4,
    Q1_0,
}

/// (id, type, name, elements per block, bytes per block); block geometry `None` for removed ids.
/// Sizes follow ggml's C block structs (`sizeof(block_*)`). Note: gguf-py 0.19 lists Q8_1 as 40
/// bytes (its old f32 d/s layout); ggml's `block_q8_1` is 36 (f16 d, f16 s, 32 x i8).
type Entry = (u32, GgmlType, &'static str, Option<(u64, u64)>);

const TABLE: [Entry; 42] = {
    use GgmlType::*;
    [
        (0, F32, "F32", Some((1, 4))),
        (1, F16, "F16", Some((1, 2))),
        (2, Q4_0, "Q4_0", Some((32, 18))),
        (3, Q4_1, "Q4_1", Some((32, 20))),
        (4, Q4_2, "Q4_2", None),
        (5, Q4_3, "Q4_3", None),
        (6, Q5_0, "Q5_0", Some((32, 22))),
        (7, Q5_1, "Q5_1", Some((32, 24))),
        (8, Q8_0, "Q8_0", Some((32, 34))),
        (9, Q8_1, "Q8_1", Some((32, 36))),
        (10, Q2_K, "Q2_K", Some((256, 84))),
        (11, Q3_K, "Q3_K", Some((256, 110))),
        (12, Q4_K, "Q4_K", Some((256, 144))),
        (13, Q5_K, "Q5_K", Some((256, 176))),
        (14, Q6_K, "Q6_K", Some((256, 210))),
        (15, Q8_K, "Q8_K", Some((256, 292))),
        (16, IQ2_XXS, "IQ2_XXS", Some((256, 66))),
        (17, IQ2_XS, "IQ2_XS", Some((256, 74))),
        (18, IQ3_XXS, "IQ3_XXS", Some((256, 98))),
        (19, IQ1_S, "IQ1_S", Some((256, 50))),
        (20, IQ4_NL, "IQ4_NL", Some((32, 18))),
        (21, IQ3_S, "IQ3_S", Some((256, 110))),
        (22, IQ2_S, "IQ2_S", Some((256, 82))),
        (23, IQ4_XS, "IQ4_XS", Some((256, 136))),
        (24, I8, "I8", Some((1, 1))),
        (25, I16, "I16", Some((1, 2))),
        (26, I32, "I32", Some((1, 4))),
        (27, I64, "I64", Some((1, 8))),
        (28, F64, "F64", Some((1, 8))),
        (29, IQ1_M, "IQ1_M", Some((256, 56))),
        (30, BF16, "BF16", Some((1, 2))),
        (31, Q4_0_4_4, "Q4_0_4_4", None),
        (32, Q4_0_4_8, "Q4_0_4_8", None),
        (33, Q4_0_8_8, "Q4_0_8_8", None),
        (34, TQ1_0, "TQ1_0", Some((256, 54))),
        (35, TQ2_0, "TQ2_0", Some((256, 66))),
        (36, IQ4_NL_4_4, "IQ4_NL_4_4", None),
        (37, IQ4_NL_4_8, "IQ4_NL_4_8", None),
        (38, IQ4_NL_8_8, "IQ4_NL_8_8", None),
        (39, MXFP4, "MXFP4", Some((32, 17))),
        (40, NVFP4, "NVFP4", Some((64, 36))),
        (41, Q1_0, "Q1_0", Some((128, 18))),
    ]
};

impl GgmlType {
    /// Every variant, in id order.
    pub fn all() -> impl Iterator<Item = GgmlType> {
        TABLE.iter().map(|e| e.1)
    }

    /// The type for a ggml id, or `None` if ggml never assigned it.
    pub fn from_id(id: u32) -> Option<GgmlType> {
        TABLE.get(id as usize).map(|e| e.1)
    }

    fn entry(self) -> &'static Entry {
        // TABLE is indexed by id and every variant appears exactly once (checked by a test).
        &TABLE[self as usize]
    }

    pub fn id(self) -> u32 {
        self.entry().0
    }

    pub fn name(self) -> &'static str {
        self.entry().2
    }

    /// Looks a type up by its ggml name (`"Q4_K"`), case-insensitively.
    pub fn from_name(name: &str) -> Option<GgmlType> {
        TABLE
            .iter()
            .find(|e| e.2.eq_ignore_ascii_case(name))
            .map(|e| e.1)
    }

    /// False for ids ggml removed (their data layout can no longer be sized).
    pub fn is_supported(self) -> bool {
        self.entry().3.is_some()
    }

    /// Elements per block (1 for plain float/int types), `None` for removed ids.
    pub fn block_size(self) -> Option<u64> {
        self.entry().3.map(|b| b.0)
    }

    /// Bytes per block, `None` for removed ids.
    pub fn type_size(self) -> Option<u64> {
        self.entry().3.map(|b| b.1)
    }

    /// Bytes for `n_elements` elements (None if removed, not a whole number of blocks, or overflow).
    pub fn bytes_for(self, n_elements: u64) -> Option<u64> {
        let (block, size) = self.entry().3?;
        if n_elements % block != 0 {
            return None;
        }
        (n_elements / block).checked_mul(size)
    }

    /// Bits per weight, for display (`4.5` for Q4_0).
    pub fn bits_per_weight(self) -> Option<f64> {
        let (block, size) = self.entry().3?;
        Some(size as f64 * 8.0 / block as f64)
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_indexed_by_id() {
        for (i, e) in TABLE.iter().enumerate() {
            assert_eq!(e.0 as usize, i, "{}", e.2);
            assert_eq!(e.1 as usize, i, "{}", e.2);
            assert_eq!(GgmlType::from_id(i as u32), Some(e.1));
            assert_eq!(GgmlType::from_name(e.2), Some(e.1));
        }
        assert_eq!(GgmlType::from_id(TABLE.len() as u32), None);
    }

    #[test]
    fn sizes_match_block_layouts() {
        // Q4_0: f16 scale + 32 nibbles; Q4_K: 2 x f16 + 12 scale bytes + 128 nibble bytes.
        assert_eq!(GgmlType::Q4_0.type_size(), Some(2 + 16));
        assert_eq!(GgmlType::Q4_K.type_size(), Some(4 + 12 + 128));
        assert_eq!(GgmlType::Q6_K.type_size(), Some(128 + 64 + 16 + 2));
        assert_eq!(GgmlType::Q4_0.bytes_for(64), Some(36));
        assert_eq!(GgmlType::Q4_0.bytes_for(33), None);
        assert_eq!(GgmlType::Q4_2.bytes_for(32), None);
        assert_eq!(GgmlType::Q4_0.bits_per_weight(), Some(4.5));
    }
}
