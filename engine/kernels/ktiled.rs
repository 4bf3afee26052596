//! "One lane = one row" repacking of the K-quant super-block formats (Q4_K, Q5_K, Q6_K) for
//! `sycl/kernels/mmvq_ktiled.cpp`, the decode-path matrix-vector kernel of those formats, and its
//! launcher. The GGUF bytes stay the source of truth (the reference is `qmatrix::matrix_ref` on
//! them); the tiled form is a permutation of those bytes, made once at upload: not one byte is
//! added except the zero rows that pad the last tile.
//!
//! Tiles of 16 rows, structure of arrays: a block's bytes are cut into pieces (u32 words, or
//! f16 halves), and piece p of the 16 rows of a tile is stored as 16 consecutive pieces, lane l
//! at l * unit (every kernel load is then `uniform + lane`, a vector load). Tile g is
//!   header: for each block ib < nb, its header pieces   (Q6_K: d f16, 32 bytes a block)
//!   records: for each block ib < nb, its record pieces  (REC bytes = 16 x the pieces' bytes)
//! in the order the kernel reads them (the hardware prefetcher then sees one rising stream):
//!   Q4_K: dm (d | dmin << 16) | scales words 0..2 | qs words 0..31            REC 2304
//!   Q5_K: dm | scales words 0..2 | qh words 0..7 | qs words 0..31            REC 2816
//!   Q6_K: scales words 0..3 | for c < 4 (n = c / 2, h = c % 2), i < 4: ql word 16n+4h+i,
//!         ql word 16n+8+4h+i, qh word 8n+4h+i                               REC 3328
//! where word j of a field is its GGUF bytes 4j..4j+3. Keeping Q6_K's d out of the records
//! keeps every record 64-byte aligned (when nb is even, as at every real shape).

use super::mmvq::NormTail;
use super::qmatrix::{
    check_act, Family, MatrixError, MatrixKernels, Result, WeightView, MMVQ_MAX_T,
};
use crate::quant::{self, type_id};
use crate::sycl::{Arg, DeviceBuffer, NdRange, Queue};

/// Rows per tile (the sub-group size of the kernel).
pub const TILE: usize = 16;

/// A format's pieces: (GGUF byte offset inside the block, bytes) in tiled order, header first.
struct Layout {
    header: Vec<(usize, usize)>,
    record: Vec<(usize, usize)>,
}

fn words(
    field: usize,
    ws: impl IntoIterator<Item = usize>,
) -> impl Iterator<Item = (usize, usize)> {
    ws.into_iter().map(move |w| (field + 4 * w, 4))
}

fn layout(t: u32) -> Option<Layout> {
    Some(match t {
        type_id::Q4_K => Layout {
            header: vec![],
            record: words(0, 0..1)
                .chain(words(4, 0..3))
                .chain(words(16, 0..32))
                .collect(),
        },
        type_id::Q5_K => Layout {
            header: vec![],
            record: words(0, 0..1)
                .chain(words(4, 0..3))
                .chain(words(16, 0..8))
                .chain(words(48, 0..32))
                .collect(),
        },
        type_id::Q6_K => {
            let mut record: Vec<_> = words(192, 0..4).collect();
            for c in 0..4 {
                let (n, h) = (c / 2, c % 2);
                for i in 0..4 {
                    record.extend(words(0, [16 * n + 4 * h + i, 16 * n + 8 + 4 * h + i]));
                    record.extend(words(128, [8 * n + 4 * h + i]));
                }
            }
            Layout {
                header: vec![(208, 2)],
                record,
            }
        }
        _ => return None,
    })
}

/// Whether `type_id` has a K-tiled layout.
pub fn supported(type_id: u32) -> bool {
    matches!(type_id, type_id::Q4_K | type_id::Q5_K | type_id::Q6_K)
}

/// Bytes of the tiled form of an (n_out, n_in) matrix (its GGUF bytes + the padding rows).
pub fn tiled_bytes(type_id: u32, n_out: usize, n_in: usize) -> Option<usize> {
    if !supported(type_id) {
        return None;
    }
    let row = quant::bytes_for(type_id, n_in).ok()?;
    Some(n_out.div_ceil(TILE) * TILE * row)
}

/// For every piece of block `ib` of row `o` (nb blocks a row), calls
/// `map(GGUF byte offset inside the block, tiled byte offset, bytes)`.
fn for_each_piece(
    lay: &Layout,
    nb: usize,
    o: usize,
    ib: usize,
    mut map: impl FnMut(usize, usize, usize),
) {
    let hdr: usize = TILE * lay.header.iter().map(|p| p.1).sum::<usize>();
    let rec: usize = TILE * lay.record.iter().map(|p| p.1).sum::<usize>();
    let (g, l) = (o / TILE, o % TILE);
    let tile_at = g * nb * (hdr + rec);
    let mut at = tile_at + ib * hdr;
    for &(off, n) in &lay.header {
        map(off, at + l * n, n);
        at += TILE * n;
    }
    let mut at = tile_at + nb * hdr + ib * rec;
    for &(off, n) in &lay.record {
        map(off, at + l * n, n);
        at += TILE * n;
    }
}

/// The tiled form of `w` ((n_out, n_in) GGUF bytes of `type_id`), or None for other formats or
/// a wrong size.
pub fn tile(type_id: u32, w: &[u8], n_out: usize, n_in: usize) -> Option<Vec<u8>> {
    let lay = layout(type_id)?;
    let (qk, bb) = quant::block_info(type_id).ok()?;
    if n_in % qk != 0 || w.len() != n_out * (n_in / qk) * bb {
        return None;
    }
    let nb = n_in / qk;
    let mut out = vec![0u8; n_out.div_ceil(TILE) * TILE * nb * bb];
    for o in 0..n_out {
        for ib in 0..nb {
            let blk = &w[(o * nb + ib) * bb..][..bb];
            for_each_piece(&lay, nb, o, ib, |src, dst, n| {
                out[dst..dst + n].copy_from_slice(&blk[src..src + n])
            });
        }
    }
    Some(out)
}

/// The GGUF bytes back from a tiled form (the inverse of `tile`, for tests and tools).
pub fn untile(type_id: u32, t: &[u8], n_out: usize, n_in: usize) -> Option<Vec<u8>> {
    let lay = layout(type_id)?;
    let (qk, bb) = quant::block_info(type_id).ok()?;
    if n_in % qk != 0 || Some(t.len()) != tiled_bytes(type_id, n_out, n_in) {
        return None;
    }
    let nb = n_in / qk;
    let mut w = vec![0u8; n_out * nb * bb];
    for o in 0..n_out {
        for ib in 0..nb {
            let blk = &mut w[(o * nb + ib) * bb..][..bb];
            for_each_piece(&lay, nb, o, ib, |src, dst, n| {
                blk[src..src + n].copy_from_slice(&t[dst..dst + n])
            });
        }
    }
    Some(w)
}

impl MatrixKernels {
    /// The K-tiled kernel (`mmvq_ktiled.cpp`): one 16-lane work-group per tile of 16 rows.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn mmvq_ktiled(
        &self,
        q: &Queue,
        w: &WeightView,
        tiled: &DeviceBuffer<u8>, // tiles of w, the layout above
        x: &DeviceBuffer<f32>,    // (>= x_row0 + t, n_in)
        x_row0: usize,
        y: &mut DeviceBuffer<f32>, // (>= y_row0 + t, n_out)
        y_row0: usize,
        t: usize,
    ) -> Result<()> {
        let what = "mmvq";
        let want = tiled_bytes(w.type_id, w.n_out, w.n_in);
        if want != Some(tiled.len()) {
            return Err(MatrixError::Shape {
                what: what.into(),
                message: format!(
                    "K-tiled copy of ({}, {}) holds {} bytes, expected {want:?}",
                    w.n_out,
                    w.n_in,
                    tiled.len()
                ),
            });
        }
        let k = self.kernel(w.type_id, Family::MmvqKTiled(t as u8), what)?;
        q.launch(
            &k,
            NdRange::groups(w.n_out.div_ceil(TILE), TILE),
            &[
                // addresses, not pointer arguments: sycl/kernels/addr.hpp
                Arg::addr(tiled),
                Arg::addr_at(x, x_row0 * w.n_in),
                Arg::addr_at(y, y_row0 * w.n_out),
                Arg::i32(w.n_in as i32),
                Arg::i32(w.n_out as i32),
            ],
        )?;
        Ok(())
    }
}

impl MatrixKernels {
    /// Whether `mmvq_post_norm` takes (W, t): a K-tiled format, 1..=8 rows, the integer-dot
    /// products off (with them the K-quant products read an 8-bit x instead).
    pub fn post_norm_takes(&self, w: &WeightView, t: usize) -> bool {
        w.tiled.is_some()
            && supported(w.type_id)
            && !self.int_dot()
            && (1..=MMVQ_MAX_T).contains(&t)
    }

    /// y = W x, then res += rms_norm(y) * post_w and yq = round_32(rms_norm(res) * tail.w) for
    /// the t rows, in one launch (`mmvq_ktiled_norm_t<t>`): bitwise the product followed by
    /// `NormQ8::norm_add_norm` with blocks of 32 (the same code; the work-group that finishes
    /// last does the norms). Returns Ok(false), launching nothing, where `post_norm_takes` says
    /// no. `tail.yq` may be x (the norms run after every read of it).
    #[allow(clippy::too_many_arguments)]
    pub fn mmvq_post_norm(
        &self,
        q: &Queue,
        w: &WeightView,              // (n_out, n_in)
        x: &DeviceBuffer<f32>,       // (t, n_in)
        y: &mut DeviceBuffer<f32>,   // (t, n_out) W x
        post_w: &DeviceBuffer<f32>,  // (n_out) norm weight of y
        res: &mut DeviceBuffer<f32>, // (t, n_out) residual, updated in place
        tail: &NormTail,
        t: usize,
    ) -> Result<bool> {
        if !self.post_norm_takes(w, t) {
            return Ok(false);
        }
        let what = "mmvq_post_norm";
        w.check(what)?;
        check_act(what, "x", x, t, w.n_in)?;
        check_act(what, "y", y, t, w.n_out)?;
        check_act(what, "residual", res, t, w.n_out)?;
        check_act(what, "post-norm weight", post_w, 1, w.n_out)?;
        tail.check(what, w.n_out, t)?;
        let tiled = w.tiled.ok_or_else(|| MatrixError::Shape {
            what: what.into(),
            message: "the matrix has no K-tiled copy".into(),
        })?;
        if tiled_bytes(w.type_id, w.n_out, w.n_in) != Some(tiled.len()) {
            return Err(MatrixError::Shape {
                what: what.into(),
                message: format!(
                    "K-tiled copy of ({}, {}) holds {} bytes",
                    w.n_out,
                    w.n_in,
                    tiled.len()
                ),
            });
        }
        let k = self.kernel(w.type_id, Family::MmvqKTiledNorm(t as u8), what)?;
        let mut args = vec![
            Arg::addr(tiled),
            Arg::addr(x),
            Arg::addr(&*y),
            Arg::addr(post_w),
            Arg::addr(&*res),
        ];
        tail.push_args(&mut args, w.n_in, w.n_out);
        q.launch(&k, NdRange::groups(w.n_out.div_ceil(TILE), TILE), &args)?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q4_k_record_layout_by_hand() {
        // 2 rows x 256: row o's block byte i = (o * 144 + i) % 251 (distinct within a block)
        let w: Vec<u8> = (0..2 * 144).map(|i| (i % 251) as u8).collect();
        let t = tile(type_id::Q4_K, &w, 2, 256).unwrap();
        assert_eq!(t.len(), 16 * 144); // one tile (14 padding rows) x one block
        assert_eq!(&t[0..8], &[0, 1, 2, 3, 144, 145, 146, 147]); // d|dmin of rows 0, 1
        assert!(t[8..64].iter().all(|&b| b == 0)); // padding lanes
        assert_eq!(&t[64..68], &[4, 5, 6, 7]); // scales word 0 of row 0
        assert_eq!(&t[64 + 68..64 + 72], &[152, 153, 154, 155]); // scales word 1 of row 1
        assert_eq!(&t[256..260], &[16, 17, 18, 19]); // qs word 0 of row 0
        let last = 256 + (31 * 16 + 1) * 4; // qs word 31 of row 1: GGUF bytes 140..143
        assert_eq!(&t[last..last + 4], &[33, 34, 35, 36]); // (284..=287) % 251
    }

    #[test]
    fn q6_k_header_and_record_order() {
        // 17 rows x 512: two tiles of two blocks; row 16 is tile 1, lane 0, block 1
        let mut w = vec![0u8; 17 * 2 * 210];
        let blk = (16 * 2 + 1) * 210;
        w[blk + 208..][..2].copy_from_slice(&[0xab, 0xcd]); // d
        w[blk + 192] = 0x77; // scale 0
        w[blk + 4 * 20..][..4].copy_from_slice(&[1, 2, 3, 4]); // ql word 20 (n 1, h 1, a-word 0)
        w[blk + 128 + 4 * 9..][..4].copy_from_slice(&[5, 6, 7, 8]); // qh word 9 (n 1, h 0, i 1)
        let t = tile(type_id::Q6_K, &w, 17, 512).unwrap();
        assert_eq!(Some(t.len()), tiled_bytes(type_id::Q6_K, 17, 512));
        let (hdr, rec) = (16 * 2, 16 * 208);
        let tile1 = 2 * (hdr + rec);
        assert_eq!(&t[tile1 + hdr..tile1 + hdr + 2], &[0xab, 0xcd]); // header of block 1
        let r = tile1 + 2 * hdr + rec; // record of block 1
        assert_eq!(t[r], 0x77);
        let word = |c: usize, i: usize, k: usize| r + 256 + ((c * 4 + i) * 3 + k) * 64;
        assert_eq!(&t[word(3, 0, 0)..word(3, 0, 0) + 4], &[1, 2, 3, 4]);
        assert_eq!(&t[word(2, 1, 2)..word(2, 1, 2) + 4], &[5, 6, 7, 8]);
        assert!(tile(type_id::Q4_0, &w, 17, 512).is_none());
        assert!(tile(type_id::Q6_K, &w[1..], 17, 512).is_none());
    }

    #[test]
    fn untile_gives_back_the_gguf_bytes() {
        for tid in [type_id::Q4_K, type_id::Q5_K, type_id::Q6_K] {
            let bb = quant::block_info(tid).unwrap().1;
            for (n_out, n_in) in [(1, 256), (16, 512), (37, 768), (640, 1024)] {
                let w: Vec<u8> = (0..n_out * n_in / 256 * bb)
                    .map(|i| (i.wrapping_mul(2654435761) >> 7) as u8)
                    .collect();
                let t = tile(tid, &w, n_out, n_in).unwrap();
                assert_eq!(
                    untile(tid, &t, n_out, n_in).unwrap(),
                    w,
                    "{tid} ({n_out}, {n_in})"
                );
                // a permutation plus zero padding: same multiset of non-zero bytes
                let count = |v: &[u8]| v.iter().filter(|&&b| b != 0).count();
                assert_eq!(count(&t), count(&w));
            }
        }
    }
}
