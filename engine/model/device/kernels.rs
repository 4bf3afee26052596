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
use crate::kernels::MatrixKernels;
use crate::model::plan::Plan;
use crate::model::EngineError;
use crate::sycl::Context;

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
    pub fn new(
        ctx: &Context,
        head_dim: usize,
        mat: MatrixKernels,
        plan: Plan,
    ) -> Result<Kernels, EngineError> {
        Ok(Kernels {
            mat,
            embed: Embed::new(ctx)?,
            norm: Norm::new(ctx)?,
            rope: Rope::new(ctx)?,
            kv: KvStore::new(ctx)?,
            attn: AttnDispatch::new(ctx, head_dim)?,
            act: Elementwise::new(ctx)?,
            actq: ActQ::new(ctx)?,
            norm_q8: NormQ8::new(ctx)?,
            glu_q8: GluQ8::new(ctx)?,
            rope_kv: RopeKv::new(ctx)?,
            plan,
        })
    }
}
