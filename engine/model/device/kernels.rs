//! The kernel families one forward pass launches, built once per model, and the plan that
//! picks among them (engine/model/plan/).

use crate::kernels::act::Elementwise;
use crate::kernels::actq::ActQ;
use crate::kernels::attn_prefill::AttnDispatch;
use crate::kernels::embed::Embed;
use crate::kernels::gated_attn::GatedAttnKernels;
use crate::kernels::glu_q8::GluQ8;
use crate::kernels::hc::HcRead;
use crate::kernels::hc_fast::{HcFast, Variant};
use crate::kernels::kv::KvStore;
use crate::kernels::moe::MoeKernels;
use crate::kernels::norm::Norm;
use crate::kernels::norm_q8::NormQ8;
use crate::kernels::rope::Rope;
use crate::kernels::rope_kv::RopeKv;
use crate::kernels::{MatmulTile, MatrixKernels};
use crate::model::config::ModelConfig;
use crate::model::plan::Plan;
use crate::model::EngineError;
use crate::sycl::Context;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

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
    /// The hyper-connection read (Residual::Hyper models only: built when the model needs it).
    pub hc: Option<HcRead>,
    /// `STRATA_HC_Q8=1` / `STRATA_GR_FUSED=1` on a hyper-connection model: the two-launch read
    /// the decode and verify windows take (`hc_variant`).
    pub hc_fast: Option<(HcFast, Variant)>,
    /// The MoE router, gather and combine (models with a MoE layer).
    pub moe: Option<MoeKernels>,
    /// The gated attention's q/gate split and output gate.
    pub gated: Option<GatedAttnKernels>,
    pub plan: Plan,
}

impl Kernels {
    /// Every kernel family, the matrix products' without their modules
    /// (`MatrixKernels::prepare`, which needs the weights' layouts), built for `ctx`; `stop`
    /// set: gives up before the next module (the load runs beside the weights' upload, which
    /// sets it when it fails).
    pub fn load(
        ctx: &Context,
        cfg: &ModelConfig,
        plan: Plan,
        stop: &AtomicBool,
    ) -> Result<Kernels, EngineError> {
        let head_dim = cfg.head_dim;
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
        // the families only some architectures use: a model that does not use them builds none
        let hc = match cfg.residual.hyper() {
            Some(_) => {
                go()?;
                Some(HcRead::new(ctx)?)
            }
            None => None,
        };
        let hc_fast = match hc_variant(cfg) {
            Some(v) => {
                go()?;
                Some((HcFast::new(ctx)?, v))
            }
            None => None,
        };
        let moe = match cfg.host_synchronous() {
            true => {
                go()?;
                Some(MoeKernels::new(ctx)?)
            }
            false => None,
        };
        let gated = match cfg.layers.iter().any(|l| l.attention().gated) {
            true => {
                go()?;
                Some(GatedAttnKernels::new(ctx)?)
            }
            false => None,
        };
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
            hc,
            hc_fast,
            moe,
            gated,
            plan,
        })
    }

    /// The hyper-connection read, or the error of a model that did not load it.
    pub fn hc(&self) -> Result<&HcRead, EngineError> {
        self.hc
            .as_ref()
            .ok_or_else(|| missing("the hyper-connection read"))
    }

    pub fn moe(&self) -> Result<&MoeKernels, EngineError> {
        self.moe.as_ref().ok_or_else(|| missing("the MoE kernels"))
    }

    pub fn gated(&self) -> Result<&GatedAttnKernels, EngineError> {
        self.gated
            .as_ref()
            .ok_or_else(|| missing("the gated attention kernels"))
    }
}

/// The fast hyper-connection read the flags ask for, latched at the first load of the process:
/// `STRATA_HC_Q8=1` the Q8_0 read (and then `STRATA_GR_FUSED` changes nothing), else
/// `STRATA_GR_FUSED=1` the fused read of the stored weights; None without either, or for a model
/// without hyper-connection streams. One stderr line says which, when either is on.
pub fn hc_variant(cfg: &ModelConfig) -> Option<Variant> {
    static LATCH: OnceLock<Option<Variant>> = OnceLock::new();
    let v = *LATCH.get_or_init(|| {
        use crate::flags::{on, table};
        let (q8, fused) = (on(table::HC_Q8), on(table::GR_FUSED));
        let line = match (q8, fused) {
            (true, true) => {
                "STRATA_HC_Q8=1: hyper-connection down/up read as Q8_0 copies in the \
                             decode and verify windows; STRATA_GR_FUSED=1 changes nothing while \
                             it is on"
            }
            (true, false) => {
                "STRATA_HC_Q8=1: hyper-connection down/up read as Q8_0 copies in the \
                              decode and verify windows"
            }
            (false, true) => {
                "STRATA_GR_FUSED=1: the two-launch hyper-connection read of the \
                              stored weights in the decode and verify windows"
            }
            (false, false) => return None,
        };
        eprintln!("strata: {line}");
        Some(if q8 { Variant::Q8 } else { Variant::Fused })
    });
    cfg.residual.hyper().and(v)
}

fn missing(what: &str) -> EngineError {
    EngineError::Unsupported(format!("{what}: not built for this model"))
}
