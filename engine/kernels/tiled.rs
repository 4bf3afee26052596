//! "One lane = one row" repacking of the 32-element-block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0)
//! for `sycl/kernels/mmvq_tiled.cpp`, the decode-path matrix-vector kernel. The GGUF bytes stay
//! the source of truth (the reference is `qmatrix::matrix_ref` on them); this is a permutation of
//! those bytes, done once at upload.
//!
//! Tiles of 16 rows (the last one zero-padded); tile g, block ib is one record of 16 blocks'
//! bytes, structure of arrays, at byte (g * nb + ib) * 16 * block_bytes:
//!   d[16] f16 | m[16] f16 (Q4_1, Q5_1) | qh[16] u32 (Q5_0, Q5_1) | qs
//! 4-bit formats: qs = words [4][16] u32, word j of lane l = GGUF qs bytes 4j..4j+3 of row l's
//! block (byte b: element 4j+b in the low nibble, 16+4j+b in the high one).
//! Q8_0: qs = byte planes [32][16] i8, plane e = element e of the 16 rows (one sign-extending
//! 16-byte load per element in the kernel).
//! Q5_0/Q5_1: qh's 32 bits permuted so that bit 8k+4+j = the high bit of element 4j+k and bit
//! 8k+j = that of element 16+4j+k (j, k < 4): one shift and mask put word j's four high bits at
//! bit 4 of each nibble byte.
//! A record is 16 * block_bytes: no byte is added except the padding rows.

use crate::quant::{self, type_id};

/// Rows per tile (the sub-group size of the kernel).
pub const TILE: usize = 16;

/// Tiles one work-group (one lane per row, R rows per lane) takes at `t` columns: must match
/// KT_R in mmvq_tiled.cpp (1 for now: see the measurement there). Changes the launch geometry
/// only, never a result.
pub fn tiles_per_group(_t: usize) -> usize {
    1
}

/// The kernel's qh word for Q5 formats (see the module comment) from GGUF's (bit e = element e).
fn permute_qh(qh: u32) -> u32 {
    let mut out = 0u32;
    for j in 0..4 {
        for k in 0..4 {
            out |= ((qh >> (4 * j + k)) & 1) << (8 * k + 4 + j);
            out |= ((qh >> (16 + 4 * j + k)) & 1) << (8 * k + j);
        }
    }
    out
}

/// (offset of m, offset of qh, offset of qs, qs bytes) inside one GGUF block, for the formats
/// the tiled kernel takes.
fn fields(t: u32) -> Option<(Option<usize>, Option<usize>, usize, usize)> {
    Some(match t {
        type_id::Q4_0 => (None, None, 2, 16),
        type_id::Q4_1 => (Some(2), None, 4, 16),
        type_id::Q5_0 => (None, Some(2), 6, 16),
        type_id::Q5_1 => (Some(2), Some(4), 8, 16),
        type_id::Q8_0 => (None, None, 2, 32),
        _ => return None,
    })
}

/// Whether `type_id` has a tiled layout.
pub fn supported(type_id: u32) -> bool {
    fields(type_id).is_some()
}

/// Whether the tiled kernel of `type_id` reads a staged x (`-DCFG_XS_PRE`, xstage.rs): the
/// formats with a block sum (a min or an offset), i.e. every one but Q8_0.
pub fn reads_stage(type_id: u32) -> bool {
    supported(type_id) && type_id != quant::type_id::Q8_0
}

/// Bytes of the tiled form of an (n_out, n_in) matrix.
pub fn tiled_bytes(type_id: u32, n_out: usize, n_in: usize) -> Option<usize> {
    fields(type_id)?;
    let row = quant::bytes_for(type_id, n_in).ok()?;
    Some(n_out.div_ceil(TILE) * TILE * row)
}

/// The tiled form of `w` ((n_out, n_in) GGUF bytes of `type_id`), or None for other formats.
/// `w` must hold exactly n_out rows (the caller checked the size).
pub fn tile(type_id: u32, w: &[u8], n_out: usize, n_in: usize) -> Option<Vec<u8>> {
    let (m_off, qh_off, qs_off, qs_len) = fields(type_id)?;
    let (_, bb) = quant::block_info(type_id).ok()?;
    let nb = n_in / 32;
    let row_bytes = nb * bb;
    if w.len() != n_out * row_bytes {
        return None;
    }
    let tiles = n_out.div_ceil(TILE);
    let mut out = vec![0u8; tiles * TILE * row_bytes];
    let rec = TILE * bb;
    let (m_at, qh_at) = (2 * TILE, (2 + 2 * m_off.is_some() as usize) * TILE);
    let qs_at = qh_at + 4 * TILE * qh_off.is_some() as usize;
    for o in 0..n_out {
        let (g, l) = (o / TILE, o % TILE);
        for ib in 0..nb {
            let blk = &w[o * row_bytes + ib * bb..][..bb];
            let r = &mut out[(g * nb + ib) * rec..][..rec];
            r[2 * l..2 * l + 2].copy_from_slice(&blk[..2]);
            if let Some(mo) = m_off {
                r[m_at + 2 * l..m_at + 2 * l + 2].copy_from_slice(&blk[mo..mo + 2]);
            }
            if let Some(ho) = qh_off {
                let qh = u32::from_le_bytes([blk[ho], blk[ho + 1], blk[ho + 2], blk[ho + 3]]);
                r[qh_at + 4 * l..qh_at + 4 * l + 4].copy_from_slice(&permute_qh(qh).to_le_bytes());
            }
            if type_id == type_id::Q8_0 {
                for e in 0..qs_len {
                    r[qs_at + e * TILE + l] = blk[qs_off + e];
                }
            } else {
                for j in 0..qs_len / 4 {
                    let at = qs_at + (j * TILE + l) * 4;
                    r[at..at + 4].copy_from_slice(&blk[qs_off + 4 * j..qs_off + 4 * j + 4]);
                }
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q4_1_record_layout_by_hand() {
        // 2 rows x 32 elements: row o's block = d (2 bytes o*10+1, o*10+2), m, qs 16 bytes
        let mut w = Vec::new();
        for o in 0..2u8 {
            w.extend([o * 10 + 1, o * 10 + 2, o * 10 + 3, o * 10 + 4]);
            w.extend((0..16u8).map(|i| 100 + o * 20 + i));
        }
        let t = tile(type_id::Q4_1, &w, 2, 32).unwrap();
        assert_eq!(t.len(), 16 * 20); // one tile (14 padding rows) x one block
        assert_eq!(&t[0..4], &[1, 2, 11, 12]); // d of rows 0, 1
        assert_eq!(&t[32..36], &[3, 4, 13, 14]); // m of rows 0, 1
                                                 // qs word 0 of lanes 0 and 1, then word 1 of lane 0
        assert_eq!(&t[64..72], &[100, 101, 102, 103, 120, 121, 122, 123]);
        assert_eq!(&t[64 + 64..64 + 68], &[104, 105, 106, 107]);
        assert!(t[72..128].iter().all(|&b| b == 0)); // padding lanes of word 0
    }

    #[test]
    fn q5_0_qh_and_sizes() {
        let mut w = vec![0u8; 17 * 2 * 22]; // 17 rows x 64 elements: two tiles
        w[16 * 44 + 22 + 2..16 * 44 + 22 + 6].copy_from_slice(&[9, 8, 7, 6]); // row 16 block 1 qh
        let t = tile(type_id::Q5_0, &w, 17, 64).unwrap();
        assert_eq!(Some(t.len()), tiled_bytes(type_id::Q5_0, 17, 64));
        let rec = 16 * 22;
        let at = (2 + 1) * rec + 32; // tile 1, block 1, qh of lane 0
        let want = permute_qh(u32::from_le_bytes([9, 8, 7, 6])).to_le_bytes();
        assert_eq!(&t[at..at + 4], &want);
        assert!(tile(type_id::Q4_K, &w, 17, 64).is_none());
    }

    #[test]
    fn qh_permutation_by_hand() {
        // element 0 -> bit 4; element 5 (j 1, k 1) -> bit 13; element 16 -> bit 0;
        // element 31 (j 3, k 3) -> bit 27
        assert_eq!(permute_qh(1), 1 << 4);
        assert_eq!(permute_qh(1 << 5), 1 << 13);
        assert_eq!(permute_qh(1 << 16), 1);
        assert_eq!(permute_qh(1 << 31), 1 << 27);
        assert_eq!(permute_qh(u32::MAX), u32::MAX);
    }

    #[test]
    fn q8_0_byte_planes() {
        // 2 rows x 32 elements: row o's qs byte e = 10 * o + e
        let mut w = Vec::new();
        for o in 0..2u8 {
            w.extend([1, 2]);
            w.extend((0..32u8).map(|e| 10 * o + e));
        }
        let t = tile(type_id::Q8_0, &w, 2, 32).unwrap();
        let qs = 32; // after d[16]
        assert_eq!(&t[qs..qs + 2], &[0, 10]); // plane 0: element 0 of rows 0, 1
        assert_eq!(&t[qs + 16 * 31..qs + 16 * 31 + 2], &[31, 41]); // plane 31
    }
}
