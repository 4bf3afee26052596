//! Launcher of `sycl/kernels/mmvq.cpp`: quantized weight x 1..8 activation rows (decode and the
//! speculative verify window). Row t of a T-row call is bitwise the one-row call on row t.
//! Reference: `qmatrix::matrix_ref` (f64).

use super::qmatrix::{
    check_act, Family, MatrixError, MatrixKernels, Result, WeightView, MMVQ_MAX_T,
    MMVQ_ROWS_PER_GROUP, SG,
};
use super::tiled;
use super::vnni;
use super::xstage::XStage;
use crate::sycl::{Arg, DeviceBuffer, NdRange, Queue};

impl MatrixKernels {
    /// y[t, o] = sum_i W[o, i] * x[t, i] for t < `t` (1..=8), o < n_out. Asynchronous on `q`.
    pub fn mmvq(
        &self,
        q: &Queue,
        w: &WeightView,            // (n_out, n_in), ggml type w.type_id
        x: &DeviceBuffer<f32>,     // (t, n_in)
        y: &mut DeviceBuffer<f32>, // (t, n_out)
        t: usize,
    ) -> Result<()> {
        self.mmvq_at(q, w, x, 0, y, 0, t)
    }

    /// `mmvq` on rows `x_row0..x_row0+t` of x, writing rows `y_row0..y_row0+t` of y (e.g. the
    /// output head on the last row of a prompt chunk).
    #[allow(clippy::too_many_arguments)]
    pub fn mmvq_at(
        &self,
        q: &Queue,
        w: &WeightView,        // (n_out, n_in), ggml type w.type_id
        x: &DeviceBuffer<f32>, // (>= x_row0 + t, n_in)
        x_row0: usize,
        y: &mut DeviceBuffer<f32>, // (>= y_row0 + t, n_out)
        y_row0: usize,
        t: usize,
    ) -> Result<()> {
        self.mmvq_at_st(q, w, x, x_row0, None, y, y_row0, t)
    }

    /// `mmvq` with x's stage (xstage.rs), written by the kernel that rounded x: the same
    /// outputs; the tiled formats with a block sum read it instead of staging x themselves.
    pub fn mmvq_staged(
        &self,
        q: &Queue,
        w: &WeightView,            // (n_out, n_in)
        x: &DeviceBuffer<f32>,     // (t, n_in)
        st: Option<XStage>,        // x staged, (t * n_in) elements
        y: &mut DeviceBuffer<f32>, // (t, n_out)
        t: usize,
    ) -> Result<()> {
        self.mmvq_at_st(q, w, x, 0, st, y, 0, t)
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn mmvq_at_st(
        &self,
        q: &Queue,
        w: &WeightView,        // (n_out, n_in), ggml type w.type_id
        x: &DeviceBuffer<f32>, // (>= x_row0 + t, n_in)
        x_row0: usize,
        st: Option<XStage>,        // x staged, (x_row0 + t) * n_in elements
        y: &mut DeviceBuffer<f32>, // (>= y_row0 + t, n_out)
        y_row0: usize,
        t: usize,
    ) -> Result<()> {
        let what = "mmvq";
        w.check(what)?;
        // the opt-in integer-dot kernel (vnni.rs) on the tiled or K-tiled copy, at any t (the
        // prompt's rows too: `mul`)
        let int_dot = w.tiled.is_some() && self.int_dot_reads(w.type_id, st);
        if t == 0 || (t > MMVQ_MAX_T && !int_dot) {
            return Err(MatrixError::Shape {
                what: what.into(),
                message: format!("t = {t} rows; mmvq takes 1..={MMVQ_MAX_T} (use matmul)"),
            });
        }
        check_act(what, "x", x, x_row0 + t, w.n_in)?;
        check_act(what, "y", y, y_row0 + t, w.n_out)?;
        if t <= MMVQ_MAX_T && super::mmvq_kreg::try_kreg(q, w, x, x_row0, y, y_row0, t)? {
            return Ok(()); // STRATA_MMVQ_KREG=1 and KREG took the matrix (docs/flags.md)
        }
        // Repacked one lane per row at load: tiled.rs (Q4_0/Q4_1/Q5_0/Q5_1/Q8_0) or ktiled.rs
        // (Q4_K/Q5_K/Q6_K; with STRATA_MMVQ_KREG=1 KREG took those above and never gets here).
        if let Some(tiled) = w.tiled {
            if super::ktiled::supported(w.type_id) && !int_dot {
                return self.mmvq_ktiled(q, w, tiled, x, x_row0, y, y_row0, t);
            }
            let m = Tiled::new(w, &*y, y_row0)?;
            return self.mmvq_tiled(q, &[m], x, x_row0, None, st, t);
        }
        let k = self.kernel(w.type_id, Family::Mmvq, what)?;
        let groups = w.n_out.div_ceil(MMVQ_ROWS_PER_GROUP);
        q.launch(
            &k,
            NdRange::groups(groups, MMVQ_ROWS_PER_GROUP * SG),
            &[
                Arg::buf_at(w.gguf(what)?, w.offset),
                Arg::buf_at(x, x_row0 * w.n_in),
                Arg::buf_at(y, y_row0 * w.n_out),
                Arg::i32(w.n_in as i32),
                Arg::i32(w.n_out as i32),
                Arg::i32(t as i32),
            ],
        )?;
        Ok(())
    }

    /// Several products of the same input in one launch (q/k/v, gate/up): `outs[i].1 =
    /// outs[i].0 x` for t rows (1..=8). Every output is bitwise what a separate `mmvq` gives.
    /// Takes the launch only when there are 1..=3 matrices, all with a tiled layout
    /// (`tiled.rs`) of one format and one n_in; returns Ok(false), launching nothing, otherwise
    /// (the caller then launches them one by one). `st`: x's stage (xstage.rs), written by the
    /// kernel that rounded x, if any: the same outputs, fewer instructions per block.
    pub fn mmvq_group(
        &self,
        q: &Queue,
        x: &DeviceBuffer<f32>,                              // (t, n_in)
        st: Option<XStage>,                                 // x staged, (t * n_in) elements
        outs: &mut [(&WeightView, &mut DeviceBuffer<f32>)], // (n_out_i, n_in), (t, n_out_i)
        t: usize,
    ) -> Result<bool> {
        let Some((first, _)) = outs.first() else {
            return Ok(false);
        };
        let (tid, n_in) = (first.type_id, first.n_in);
        if outs.len() > 3
            || t == 0
            || t > MMVQ_MAX_T
            || outs
                .iter()
                .any(|(w, _)| w.tiled.is_none() || w.type_id != tid || w.n_in != n_in)
            || !tiled::supported(tid)
        {
            return Ok(false);
        }
        check_act("mmvq", "x", x, t, n_in)?;
        let mut mats = Vec::with_capacity(outs.len());
        for (w, y) in outs.iter_mut() {
            w.check("mmvq")?;
            check_act("mmvq", "y", y, t, w.n_out)?;
            mats.push(Tiled::new(w, y, 0)?);
        }
        self.mmvq_tiled(q, &mats, x, 0, None, st, t)?;
        Ok(true)
    }

    /// y = y + W x for t rows (1..=8) in one launch: bitwise the product into a buffer o
    /// followed by the f32 add y + o (`Elementwise::add`). Only for a tiled W; returns Ok(false),
    /// launching nothing, otherwise. `st` as in `mmvq_group`.
    pub fn mmvq_residual(
        &self,
        q: &Queue,
        w: &WeightView,            // (n_out, n_in)
        x: &DeviceBuffer<f32>,     // (t, n_in)
        st: Option<XStage>,        // x staged, (t * n_in) elements
        y: &mut DeviceBuffer<f32>, // (t, n_out) residual in, residual + W x out
        t: usize,
    ) -> Result<bool> {
        // (the K-quants' copies are ktiled.rs's layout: only the integer-dot kernel has a
        // residual form for them)
        let takes = tiled::supported(w.type_id) || self.int_dot_reads(w.type_id, st);
        if w.tiled.is_none() || !takes || t == 0 || t > MMVQ_MAX_T {
            return Ok(false);
        }
        w.check("mmvq")?;
        check_act("mmvq", "x", x, t, w.n_in)?;
        check_act("mmvq", "y", y, t, w.n_out)?;
        let m = Tiled::new(w, &*y, 0)?;
        self.mmvq_tiled(q, &[m], x, 0, Some(y), st, t)?;
        Ok(true)
    }

    /// Whether `mmvq_residual_norm` takes (W, x's stage, t): a tiled 32-block format, 1..=8 rows,
    /// not the integer-dot kernel's, and x staged where the format reads a stage.
    pub fn residual_norm_takes(&self, w: &WeightView, st: Option<XStage>, t: usize) -> bool {
        w.tiled.is_some()
            && tiled::supported(w.type_id)
            && !self.int_dot_reads(w.type_id, st)
            && (1..=MMVQ_MAX_T).contains(&t)
            && (!tiled::reads_stage(w.type_id) || st.is_some_and(|s| s.block() == 32))
    }

    /// y = y + W x, then yq = round_32(rms_norm(y) * tail.w) for the t rows (1..=8), in one
    /// launch (`mmvq_tiled_norm_t<t>`): bitwise `mmvq_residual` followed by `NormQ8::rms_norm`
    /// with blocks of 32 (the same code; the work-group that finishes last does the norm).
    /// Returns Ok(false), launching nothing, where `residual_norm_takes` says no. `yq` and its
    /// stage may be x and x's stage (the norm runs after every read of them).
    #[allow(clippy::too_many_arguments)]
    pub fn mmvq_residual_norm(
        &self,
        q: &Queue,
        w: &WeightView,            // (n_out, n_in)
        x: &DeviceBuffer<f32>,     // (t, n_in)
        st: Option<XStage>,        // x staged, (t * n_in) elements
        y: &mut DeviceBuffer<f32>, // (t, n_out) residual in, residual + W x out
        tail: &NormTail,
        t: usize,
    ) -> Result<bool> {
        if !self.residual_norm_takes(w, st, t) {
            return Ok(false);
        }
        let what = "mmvq_residual_norm";
        w.check(what)?;
        check_act(what, "x", x, t, w.n_in)?;
        check_act(what, "y", y, t, w.n_out)?;
        tail.check(what, w.n_out, t)?;
        let st = st.filter(|_| tiled::reads_stage(w.type_id));
        if let Some(s) = &st {
            s.check(what, t * w.n_in)?;
        }
        let m = Tiled::new(w, &*y, 0)?;
        let k = self.kernel(w.type_id, Family::MmvqTiledNorm(t as u8), what)?;
        let (xs, sx) = match st {
            Some(s) => s.args_at(0, w.n_in),
            None => (Arg::u64(0), Arg::u64(0)),
        };
        let mut args = vec![Arg::addr(m.tiles), Arg::addr(x), Arg::addr(&*y), xs, sx];
        tail.push_args(&mut args, w.n_in, w.n_out);
        let groups = w.n_out.div_ceil(tiled::TILE);
        q.launch(&k, NdRange::groups(groups, tiled::TILE), &args)?;
        Ok(true)
    }

    /// Whether the integer-dot kernel takes format `type_id` with this stage: on, and the stage
    /// of the rounding block the format's records need (vnni.rs).
    pub(super) fn int_dot_reads(&self, type_id: u32, st: Option<XStage>) -> bool {
        self.int_dot() && st.is_some_and(|s| vnni::stage_block(type_id) == Some(s.block()))
    }

    /// The tiled kernel (`mmvq_tiled.cpp`) over 1..=3 matrices of one format and n_in: one
    /// 16-lane work-group per `tiles_per_group(t)` tiles of 16 rows, the matrices one after the
    /// other.
    /// `r`: the residual added to matrix 0's output (the same buffer as its y). `st`: x's stage
    /// (rows x_row0.. of it), read by the formats with a block sum (`tiled::reads_stage`).
    #[allow(clippy::too_many_arguments)]
    fn mmvq_tiled(
        &self,
        q: &Queue,
        mats: &[Tiled],
        x: &DeviceBuffer<f32>, // (>= x_row0 + t, n_in)
        x_row0: usize,
        r: Option<&DeviceBuffer<f32>>, // mats[0]'s y
        st: Option<XStage>,            // x staged: (x_row0 + t) * n_in elements
        t: usize,
    ) -> Result<()> {
        debug_assert!((1..=3).contains(&mats.len()));
        let m0 = &mats[0];
        // the opt-in integer-dot kernel (vnni.rs) reads the stage's integer records
        let int_dot = self.int_dot_reads(m0.type_id, st);
        // (a K stage, blocks of 256, is only ever the integer-dot kernel's)
        let st = st.filter(|s| int_dot || (s.block() == 32 && tiled::reads_stage(m0.type_id)));
        if let Some(s) = &st {
            // written for exactly these rows (the launches below may each read a part)
            s.check("mmvq", (x_row0 + t) * m0.n_in)?;
        }
        // (callers check t: more than 8 rows only for the integer-dot kernel)
        debug_assert!(t <= MMVQ_MAX_T || int_dot);
        if t > MMVQ_MAX_T {
            // full blocks of 8 columns in one launch, the rest at their row offset in another
            let full = t / MMVQ_MAX_T * MMVQ_MAX_T;
            self.tiled_launch(
                q,
                mats,
                x,
                x_row0,
                r,
                st,
                MMVQ_MAX_T,
                full / MMVQ_MAX_T,
                true,
            )?;
            if t > full {
                let rest: Vec<Tiled> = mats
                    .iter()
                    .map(|m| Tiled {
                        y_row0: m.y_row0 + full,
                        ..*m
                    })
                    .collect();
                self.tiled_launch(q, &rest, x, x_row0 + full, r, st, t - full, 1, true)?;
            }
            return Ok(());
        }
        self.tiled_launch(q, mats, x, x_row0, r, st, t, 1, int_dot)
    }

    /// One launch of `mmvq_tiled` or (`int_dot`) `mmvq_vnni` for `t` <= 8 columns, the latter
    /// over `n_cb` blocks of t columns.
    #[allow(clippy::too_many_arguments)]
    fn tiled_launch(
        &self,
        q: &Queue,
        mats: &[Tiled],
        x: &DeviceBuffer<f32>, // (>= x_row0 + t * n_cb, n_in)
        x_row0: usize,
        r: Option<&DeviceBuffer<f32>>, // mats[0]'s y
        st: Option<XStage>,            // x staged (checked by the caller), or None
        t: usize,
        n_cb: usize,
        int_dot: bool,
    ) -> Result<()> {
        let m0 = &mats[0];
        let family = match st {
            Some(_) if int_dot => Family::MmvqVnni(t as u8),
            Some(_) => Family::MmvqTiledPre(t as u8),
            None => Family::MmvqTiled(t as u8),
        };
        let k = self.kernel(m0.type_id, family, "mmvq")?;
        let (xs, sx) = match st {
            Some(s) if int_dot => s.int_args_at(x_row0, m0.n_in)?,
            Some(s) => s.args_at(x_row0, m0.n_in),
            None => (Arg::u64(0), Arg::u64(0)),
        };
        let tiles = |m: &Tiled| m.n_out.div_ceil(tiled::TILE);
        let range = if int_dot {
            // one work-item per tile, all matrices' tiles in a row
            let per = vnni::TILES_PER_GROUP;
            let items = mats.iter().map(tiles).sum::<usize>() * n_cb;
            NdRange::groups(items.div_ceil(per), per)
        } else {
            // each matrix's tiles in work-groups of R tiles (its last one possibly short)
            let per = tiled::tiles_per_group(t);
            let groups = mats.iter().map(|m| tiles(m).div_ceil(per)).sum();
            NdRange::groups(groups, tiled::TILE)
        };
        // addresses, not pointer arguments: sycl/kernels/addr.hpp
        let w = |i: usize| mats.get(i).map_or(Arg::u64(0), |m| Arg::addr(m.tiles));
        let y = |i: usize| {
            mats.get(i)
                .map_or(Arg::u64(0), |m| Arg::addr_at(m.y, m.y_row0 * m.n_out))
        };
        let n_out = |i: usize| Arg::i32(mats.get(i).map_or(0, |m| m.n_out as i32));
        let mut args = vec![
            w(0),
            w(1),
            w(2),
            Arg::addr_at(x, x_row0 * m0.n_in),
            y(0),
            y(1),
            y(2),
            r.map_or(Arg::u64(0), |r| Arg::addr_at(r, m0.y_row0 * m0.n_out)),
            xs,
            sx,
            Arg::i32(m0.n_in as i32),
            n_out(0),
            n_out(1),
            n_out(2),
        ];
        if int_dot {
            args.push(Arg::i32(n_cb as i32)); // mmvq_vnni's column blocks
        }
        q.launch(&k, range, &args)?;
        Ok(())
    }
}

/// The norm `mmvq_residual_norm` folds into its launch: yq = round_32(rms_norm(y) * w).
pub struct NormTail<'a> {
    /// (1) zero before the first launch; each launch leaves it zero (one per queue: launches
    /// on one in-order queue never overlap)
    pub counter: &'a DeviceBuffer<u32>,
    pub w: &'a DeviceBuffer<f32>,  // (n_out) norm weight
    pub yq: &'a DeviceBuffer<f32>, // (t, n_out) rounded normed output
    /// yq staged for the products after it (blocks of 32), as `NormQ8::rms_norm`'s
    pub st: Option<XStage<'a>>,
    pub eps: f32,
}

impl<'a> NormTail<'a> {
    /// The arguments every folded kernel ends with (mmvq_tiled.cpp's and mmvq_ktiled.cpp's
    /// `*_norm_t<T>`): the counter, the norm weight, yq, its stage, n_in, n_out, eps.
    pub(super) fn push_args(&self, args: &mut Vec<Arg<'a>>, n_in: usize, n_out: usize) {
        args.extend([
            Arg::addr(self.counter),
            Arg::addr(self.w),
            Arg::addr(self.yq),
        ]);
        XStage::push_arg(args, 32, self.st);
        args.extend([
            Arg::i32(n_in as i32),
            Arg::i32(n_out as i32),
            Arg::f32(self.eps),
        ]);
    }

    /// Checks the tail's buffers for t rows of n (the product's n_out).
    pub(super) fn check(&self, what: &str, n: usize, t: usize) -> Result<()> {
        check_act(what, "yq", self.yq, t, n)?;
        check_act(what, "norm weight", self.w, 1, n)?;
        if self.counter.is_empty() || n % 32 != 0 {
            return Err(MatrixError::Shape {
                what: what.into(),
                message: format!(
                    "n_out {n} (a multiple of the rounding block 32 wanted), arrival counter of \
                     {} elements (1 wanted)",
                    self.counter.len()
                ),
            });
        }
        if let Some(s) = &self.st {
            if s.block() != 32 {
                return Err(MatrixError::Shape {
                    what: what.into(),
                    message: format!("the norm's stage is of blocks of {}, not 32", s.block()),
                });
            }
            s.check("norm tail", t * n)?;
        }
        Ok(())
    }
}

/// One matrix of a tiled launch: its tiles and where its output rows go.
#[derive(Clone, Copy)]
struct Tiled<'a> {
    tiles: &'a DeviceBuffer<u8>, // tiled.rs layout of (n_out, n_in)
    y: &'a DeviceBuffer<f32>,    // (>= y_row0 + t, n_out)
    y_row0: usize,
    type_id: u32,
    n_out: usize,
    n_in: usize,
}

impl<'a> Tiled<'a> {
    /// Checks the tiled copy's size against the view's shape.
    fn new(w: &WeightView<'a>, y: &'a DeviceBuffer<f32>, y_row0: usize) -> Result<Tiled<'a>> {
        let tiles = w.tiled.ok_or_else(|| MatrixError::Shape {
            what: "mmvq".into(),
            message: "the matrix has no tiled copy".into(),
        })?;
        let want = tiled::tiled_bytes(w.type_id, w.n_out, w.n_in)
            .or_else(|| super::ktiled::tiled_bytes(w.type_id, w.n_out, w.n_in));
        if want != Some(tiles.len()) {
            return Err(MatrixError::Shape {
                what: "mmvq".into(),
                message: format!(
                    "tiled copy of ({}, {}) holds {} bytes, expected {want:?}",
                    w.n_out,
                    w.n_in,
                    tiles.len()
                ),
            });
        }
        Ok(Tiled {
            tiles,
            y,
            y_row0,
            type_id: w.type_id,
            n_out: w.n_out,
            n_in: w.n_in,
        })
    }
}
