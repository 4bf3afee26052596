//! The i-quants' lookup tables (ggml-common.h's `iq2xxs_grid`, `ksigns_iq2xs`, ...) as data:
//! `engine/quant/grids/<name>.bin`, raw little-endian arrays of the C element type, written by
//! `scripts/iq_grids.py` from llama.cpp's source. This file is their only reader: the CPU
//! dequantizers use the typed statics below (decoded at compile time), and the SYCL matrix
//! kernels get the same bytes as `static const` C arrays (`c_tables`, prepended to their
//! source by engine/sycl/kernels.rs). Each file's sha256 is written here and in the script, and
//! checked by the tests below, so a changed or damaged table cannot pass unnoticed.
//! See docs/quant.md, "i-quant grid tables".

/// One table file.
#[derive(Debug)]
pub struct Table {
    /// The ggml name, used verbatim for the C array.
    pub name: &'static str,
    /// C element type (`uint8_t`, `uint32_t`, `uint64_t`).
    pub c_type: &'static str,
    /// Bytes per element.
    pub elem_bytes: usize,
    /// The file, little-endian.
    pub bytes: &'static [u8],
    /// sha256 of `bytes` (hex), the same value as in scripts/iq_grids.py.
    pub sha256: &'static str,
}

impl Table {
    pub fn len(&self) -> usize {
        self.bytes.len() / self.elem_bytes
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Element `i` as an unsigned integer (little-endian bytes).
    pub fn get(&self, i: usize) -> u64 {
        let b = &self.bytes[i * self.elem_bytes..(i + 1) * self.elem_bytes];
        b.iter().rev().fold(0u64, |v, &byte| (v << 8) | byte as u64)
    }
}

macro_rules! table {
    ($name:literal, $ty:literal, $eb:literal, $sha:literal) => {
        Table {
            name: $name,
            c_type: $ty,
            elem_bytes: $eb,
            bytes: include_bytes!(concat!("grids/", $name, ".bin")),
            sha256: $sha,
        }
    };
}

pub const KMASK_IQ2XS_T: Table = table!(
    "kmask_iq2xs",
    "uint8_t",
    1,
    "5ac9831b2e30eb285ef34f8501620f878432d5c04331ad1ae47f977a83ba41a5"
);
pub const KSIGNS_IQ2XS_T: Table = table!(
    "ksigns_iq2xs",
    "uint8_t",
    1,
    "a76742a603f8beca5212ecce0f1f02f11a4887fd2f7c8b15aca0ea3eb3380c31"
);
pub const IQ2XXS_GRID_T: Table = table!(
    "iq2xxs_grid",
    "uint64_t",
    8,
    "05826b5d3e472a3a78f196be62ac78acf81df0f909626e12ab9fa2a5d490dd54"
);
pub const IQ2XS_GRID_T: Table = table!(
    "iq2xs_grid",
    "uint64_t",
    8,
    "06e47aaca60b4dc1d9b5a3f34540437058a6b142b4d7a59d5ded769b4d1bf1de"
);
pub const IQ2S_GRID_T: Table = table!(
    "iq2s_grid",
    "uint64_t",
    8,
    "e1aa1473412b0552c2174c30ef22ab4073f6a181b85a17056e8249bd2932fd88"
);
pub const IQ3XXS_GRID_T: Table = table!(
    "iq3xxs_grid",
    "uint32_t",
    4,
    "46e35f5a997efdee6c99ce57854c8a0d4f0ff8ca57e5e8a60c0793ea580acf5d"
);
pub const IQ3S_GRID_T: Table = table!(
    "iq3s_grid",
    "uint32_t",
    4,
    "bd1af4945a1717c65610b0284e4628b9a1ba3b306fae3a06f6e5f597356e349f"
);
pub const IQ1S_GRID_T: Table = table!(
    "iq1s_grid",
    "uint64_t",
    8,
    "07540ffc1aeaf6ad4d97e96b0fcc765aae39671d4ae4a27bbd0e796fde167c6a"
);
/// ggml's GPU form of `iq1s_grid`: per entry eight 4-bit fields holding value + 1 (0..2),
/// element j in bits 4j..4j+4 of the low/high nibbles as ggml-cuda reads them.
pub const IQ1S_GRID_GPU_T: Table = table!(
    "iq1s_grid_gpu",
    "uint32_t",
    4,
    "29bb0f4450fab4aa61d9fa9bc62a06b4a129acf31ebf38266adb6a62ef424117"
);

/// Every table, in the order `c_tables` emits them.
pub const TABLES: &[&Table] = &[
    &KMASK_IQ2XS_T,
    &KSIGNS_IQ2XS_T,
    &IQ2XXS_GRID_T,
    &IQ2XS_GRID_T,
    &IQ2S_GRID_T,
    &IQ3XXS_GRID_T,
    &IQ3S_GRID_T,
    &IQ1S_GRID_T,
    &IQ1S_GRID_GPU_T,
];

// Compile-time decoding of the little-endian files into typed arrays; a file of the wrong
// length stops the build (the assert runs in const evaluation).
const fn le_u8<const N: usize>(b: &[u8]) -> [u8; N] {
    assert!(b.len() == N, "grid file length");
    let mut out = [0u8; N];
    let mut i = 0;
    while i < N {
        out[i] = b[i];
        i += 1;
    }
    out
}

const fn le_u32<const N: usize>(b: &[u8]) -> [u32; N] {
    assert!(b.len() == 4 * N, "grid file length");
    let mut out = [0u32; N];
    let mut i = 0;
    while i < N {
        out[i] = u32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]]);
        i += 1;
    }
    out
}

const fn le_u64<const N: usize>(b: &[u8]) -> [u64; N] {
    assert!(b.len() == 8 * N, "grid file length");
    let mut out = [0u64; N];
    let mut i = 0;
    while i < N {
        let j = 8 * i;
        out[i] = u64::from_le_bytes([
            b[j],
            b[j + 1],
            b[j + 2],
            b[j + 3],
            b[j + 4],
            b[j + 5],
            b[j + 6],
            b[j + 7],
        ]);
        i += 1;
    }
    out
}

/// `kmask_iq2xs`: bit masks 1 << j.
pub static KMASK_IQ2XS: [u8; 8] = le_u8(KMASK_IQ2XS_T.bytes);
/// `ksigns_iq2xs`: 7 sign bits + an 8th that makes the count of set bits even.
pub static KSIGNS_IQ2XS: [u8; 128] = le_u8(KSIGNS_IQ2XS_T.bytes);
/// IQ2_XXS: 256 entries of 8 magnitudes (bytes 0x08, 0x19, 0x2b).
pub static IQ2XXS_GRID: [u64; 256] = le_u64(IQ2XXS_GRID_T.bytes);
/// IQ2_XS: 512 entries of 8 magnitudes.
pub static IQ2XS_GRID: [u64; 512] = le_u64(IQ2XS_GRID_T.bytes);
/// IQ2_S: 1024 entries of 8 magnitudes.
pub static IQ2S_GRID: [u64; 1024] = le_u64(IQ2S_GRID_T.bytes);
/// IQ3_XXS: 256 entries of 4 magnitudes (bytes).
pub static IQ3XXS_GRID: [u32; 256] = le_u32(IQ3XXS_GRID_T.bytes);
/// IQ3_S: 512 entries of 4 magnitudes (bytes).
pub static IQ3S_GRID: [u32; 512] = le_u32(IQ3S_GRID_T.bytes);
/// IQ1_S / IQ1_M: 2048 entries of 8 signed bytes (-1, 0, 1).
pub static IQ1S_GRID: [u64; 2048] = le_u64(IQ1S_GRID_T.bytes);
/// `iq1s_grid_gpu` (see `IQ1S_GRID_GPU_T`).
pub static IQ1S_GRID_GPU: [u32; 2048] = le_u32(IQ1S_GRID_GPU_T.bytes);

/// ggml's `IQ1S_DELTA` and `IQ1M_DELTA` (ggml-common.h): the shift applied to IQ1 grid values.
pub const IQ1S_DELTA: f32 = 0.125;
pub const IQ1M_DELTA: f32 = 0.125;

/// Byte `j` (0..8) of a 64-bit grid entry: the j-th magnitude, as ggml reads it through a
/// `const uint8_t *` on a little-endian host.
#[inline]
pub fn grid8(entry: u64, j: usize) -> u8 {
    (entry >> (8 * j)) as u8
}

/// Byte `j` (0..4) of a 32-bit grid entry.
#[inline]
pub fn grid4(entry: u32, j: usize) -> u8 {
    (entry >> (8 * j)) as u8
}

/// ggml's `(signs & kmask_iq2xs[j] ? -1.f : 1.f)`: the factor the i-quant dequantizers
/// multiply magnitude j (0..8) of a group by (multiplied, not negated, as ggml does, so even a
/// NaN scale gives ggml's bits).
#[inline]
pub fn sign_f32(signs: u8, j: usize) -> f32 {
    if signs & KMASK_IQ2XS[j] != 0 {
        -1.0
    } else {
        1.0
    }
}

/// The integer form of `sign_f32`, for the dots against quantized activations.
#[inline]
pub fn sign_i32(signs: u8, j: usize) -> i32 {
    if signs & KMASK_IQ2XS[j] != 0 {
        -1
    } else {
        1
    }
}

/// Every table as `static const` C arrays, for the SYCL kernels (engine/sycl/kernels.rs
/// prepends this before qformats.hpp for the i-quant formats); defines `KQ_GRIDS` so the
/// i-quant decoders can insist on it.
pub fn c_tables() -> String {
    use std::fmt::Write;
    let mut s = String::from(
        "// i-quant tables: engine/quant/grids/*.bin (scripts/iq_grids.py), emitted by \
         engine/quant/grids.rs\n#include <cstdint>\n#define KQ_GRIDS 1\n",
    );
    for t in TABLES {
        // (writing to a String cannot fail)
        let _ = write!(s, "static const {} {}[{}] = {{", t.c_type, t.name, t.len());
        for i in 0..t.len() {
            if i % 8 == 0 {
                s.push_str("\n ");
            }
            let v = t.get(i);
            let _ = match t.elem_bytes {
                1 => write!(s, " {v},"),
                4 => write!(s, " 0x{v:08x}u,"),
                _ => write!(s, " 0x{v:016x}ull,"),
            };
        }
        s.push_str("\n};\n");
    }
    s
}

/// `n` random blocks of `block_bytes` with a sane f16 scale at byte `d_at` (|d| in about
/// [2^-14, 2^-4], either sign): every bit pattern of the rest is a valid i-quant block, so these
/// exercise every grid index, sign pattern and sub-block scale (tests and kernel parity).
pub fn random_blocks(
    rng: &mut impl rand::Rng,
    n: usize,
    block_bytes: usize,
    d_at: usize,
) -> Vec<u8> {
    let mut b = vec![0u8; n * block_bytes];
    rng.fill_bytes(&mut b);
    for blk in b.chunks_exact_mut(block_bytes) {
        // f16 exponent field 1..=11 (2^-14 .. 2^-4), any mantissa and sign
        let e: u16 = rng.gen_range(1..=11);
        let bits = (rng.gen::<u16>() & 0x83ff) | (e << 10);
        blk[d_at..d_at + 2].copy_from_slice(&bits.to_le_bytes());
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::sha256_hex;

    #[test]
    fn files_match_their_checksums_here_and_in_the_script() {
        let script = include_str!("../../scripts/iq_grids.py");
        for t in TABLES {
            let got = sha256_hex(t.bytes);
            assert_eq!(got, t.sha256, "{}: sha256 of grids/{}.bin", t.name, t.name);
            assert!(
                script.contains(&format!("\"{}\":\n        \"{}\"", t.name, t.sha256)),
                "{}: scripts/iq_grids.py does not list sha256 {}",
                t.name,
                t.sha256
            );
        }
    }

    #[test]
    fn typed_arrays_hold_ggml_values() {
        // first / last entries as printed in ggml-common.h
        assert_eq!(KMASK_IQ2XS, [1, 2, 4, 8, 16, 32, 64, 128]);
        assert_eq!(&KSIGNS_IQ2XS[..4], &[0, 129, 130, 3]);
        assert_eq!(IQ2XXS_GRID[0], 0x0808080808080808);
        assert_eq!(IQ2XXS_GRID[1], 0x080808080808082b);
        assert_eq!(IQ3XXS_GRID[5], 0x04040c3e);
        assert_eq!(IQ1S_GRID[0], 0xffffffffffffffff);
        assert_eq!(IQ1S_GRID[2047], 0x0101010101010101);
        assert_eq!(IQ1S_GRID_GPU[1], 0x00000002);
        // ksigns: the low 7 bits are the index, bit 7 makes the popcount even
        for (i, &s) in KSIGNS_IQ2XS.iter().enumerate() {
            assert_eq!(s & 0x7f, i as u8);
            assert_eq!(s.count_ones() % 2, 0, "ksigns[{i}] = {s}");
        }
        // the magnitude sets of each grid (bytes of every entry)
        let bytes64 = |g: &[u64]| -> Vec<u8> {
            let mut v: Vec<u8> = g
                .iter()
                .flat_map(|&e| (0..8).map(move |j| grid8(e, j)))
                .collect();
            v.sort();
            v.dedup();
            v
        };
        assert_eq!(bytes64(&IQ2XXS_GRID), vec![0x08, 0x19, 0x2b]);
        assert_eq!(bytes64(&IQ2XS_GRID), vec![0x08, 0x19, 0x2b]);
        assert_eq!(bytes64(&IQ2S_GRID), vec![0x08, 0x19, 0x2b]);
        assert_eq!(bytes64(&IQ1S_GRID), vec![0x00, 0x01, 0xff]);
        let bytes32 = |g: &[u32]| -> Vec<u8> {
            let mut v: Vec<u8> = g
                .iter()
                .flat_map(|&e| (0..4).map(move |j| grid4(e, j)))
                .collect();
            v.sort();
            v.dedup();
            v
        };
        assert_eq!(bytes32(&IQ3XXS_GRID), vec![4, 12, 20, 28, 36, 44, 52, 62]);
        assert_eq!(bytes32(&IQ3S_GRID), vec![1, 3, 5, 7, 9, 11, 13, 15]);
        // every entry distinct
        for t in TABLES.iter().filter(|t| t.name.contains("grid")) {
            let mut v: Vec<u64> = (0..t.len()).map(|i| t.get(i)).collect();
            v.sort();
            v.dedup();
            assert_eq!(v.len(), t.len(), "{}: repeated entries", t.name);
        }
    }

    #[test]
    fn c_text_carries_every_value() {
        let c = c_tables();
        assert!(c.contains("static const uint64_t iq2xxs_grid[256] = {"));
        assert!(c.contains("static const uint32_t iq3s_grid[512] = {"));
        assert!(c.contains("static const uint8_t ksigns_iq2xs[128] = {"));
        // parse the arrays back and compare with the bytes
        for t in TABLES {
            let head = format!("{}[{}] = {{", t.name, t.len());
            let at = c.find(&head).expect("array present") + head.len();
            let body = &c[at..at + c[at..].find("};").expect("array closed")];
            let vals: Vec<u64> = body
                .split(',')
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(|v| {
                    let v = v.trim_end_matches("ull").trim_end_matches('u');
                    match v.strip_prefix("0x") {
                        Some(h) => u64::from_str_radix(h, 16).expect("hex"),
                        None => v.parse().expect("decimal"),
                    }
                })
                .collect();
            let want: Vec<u64> = (0..t.len()).map(|i| t.get(i)).collect();
            assert_eq!(vals, want, "{}", t.name);
        }
    }
}
