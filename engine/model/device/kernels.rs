//! The kernel families one forward pass launches, built once per model, and the plan that
//! picks among them (engine/model/plan/).

use crate::kernels::act::Elementwise;
use crate::kernels::actq::ActQ;
use crate::kernels::attn_prefill::AttnDispatch;
use crate::kernels::embed::Embed;
use crate::kernels::glu_q8::GluQ8;
use crate::kernels::kv::KvStore;
use crate::kernels::norm::Norm;
use crate::kernels::norm_q8::NormQ8;
use crate::kernels::rope::Rope;
use crate::kernels::rope_kv::RopeKv;
use crate::kernels::{MatmulTile, MatrixKernels};
use crate::model::plan::Plan;
use crate::model::EngineError;
use crate::sycl::Context;
use std::sync::atomic::{AtomicBool, Ordering};

pub struct Kernels {
    pub mat: MatrixKernels,
    pub embed: Embed,
    pub norm: Norm,
    pub rope: Rope,
    pub kv: KvStore,
    pub attn: AttnDispatch,
    pub act: Elementwise,
    pub actq: ActQ,
    pub norm_q8: NormQ8,
    pub glu_q8: GluQ8,
    pub rope_kv: RopeKv,
    pub plan: Plan,
}

impl Kernels {
    /// Every kernel family, the matrix products' without their modules
    /// (`MatrixKernels::prepare`, which needs the weights' layouts), built for `ctx`; `stop`
    /// set: gives up before the next module (the load runs beside the weights' upload, which
    /// sets it when it fails).
    pub fn load(
        ctx: &Context,
        head_dim: usize,
        plan: Plan,
        stop: &AtomicBool,
    ) -> Result<Kernels, EngineError> {
        let go = || match stop.load(Ordering::Relaxed) {
            true => Err(EngineError::Unsupported("kernel load abandoned".into())),
            false => Ok(()),
        };
        // the prompt path's register tile: the device's, unless STRATA_MATMUL_TILE forces one
        let mut mat = MatrixKernels::with_matmul_tile(ctx, MatmulTile::for_context_or_env(ctx)?);
        tracing::info!(tile = %mat.matmul_tile().label(), "matmul register tile");
        // STRATA_VNNI=1: the integer-dot decode products (not bitwise the default; refused with
        // the reason where they cannot run)
        if crate::kernels::vnni::requested() {
            mat.set_int_dot(true)?;
            let isa = mat.int_dot_isa().map_or("?", |i| i.label());
            tracing::info!(isa, "integer-dot products on (STRATA_VNNI=1)");
        }
        go()?;
        let embed = Embed::new(ctx)?;
        go()?;
        let norm = Norm::new(ctx)?;
        go()?;
        let rope = Rope::new(ctx)?;
        go()?;
        let kv = KvStore::new(ctx)?;
        go()?;
        let attn = AttnDispatch::new(ctx, head_dim)?;
        go()?;
        let act = Elementwise::new(ctx)?;
        go()?;
        let actq = ActQ::new(ctx)?;
        go()?;
        let norm_q8 = NormQ8::new(ctx)?;
        go()?;
        let glu_q8 = GluQ8::new(ctx)?;
        go()?;
        let rope_kv = RopeKv::new(ctx)?;
        Ok(Kernels {
            mat,
            embed,
            norm,
            rope,
            kv,
            attn,
            act,
            actq,
            norm_q8,
            glu_q8,
            rope_kv,
            plan,
        })
    }
}
