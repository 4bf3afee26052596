//! The attention kernels' test shapes (tests/kernels_attn*.rs): one case = a model's head
//! geometry, context and window.

use half::f16;
use rand::rngs::StdRng;
use rand::Rng;
use strata::kernels::attn::{self, AttnCall};
use strata::sycl::{DeviceBuffer, Queue};

pub struct AttnCase {
    pub name: &'static str,
    pub n_head: usize,
    pub n_kv: usize,
    pub hd: usize,
    pub n_ctx: usize,
    pub window: usize,
}

impl AttnCase {
    pub fn scale(&self) -> f32 {
        1.0 / (self.hd as f32).sqrt()
    }
    /// The call of this case's shape on these buffers for `t` rows.
    pub fn call<'a>(
        &self,
        qrows: &'a DeviceBuffer<f32>,
        kc: &'a DeviceBuffer<f16>,
        vc: &'a DeviceBuffer<f16>,
        pos: &'a DeviceBuffer<i32>,
        out: &'a DeviceBuffer<f32>,
        t: usize,
    ) -> AttnCall<'a> {
        AttnCall {
            qrows,
            kc,
            vc,
            pos,
            out,
            t,
            n_head: self.n_head,
            n_kv_head: self.n_kv,
            n_ctx: self.n_ctx,
            window: self.window,
            scale: self.scale(),
        }
    }
    pub fn cache(&self, rng: &mut StdRng) -> Vec<f16> {
        (0..self.n_kv * self.n_ctx * self.hd)
            .map(|_| f16::from_f32(rng.gen_range(-1.0f32..1.0)))
            .collect()
    }

    /// The t = pos.len() rows of one call of `kernel` (`Attention::run`, `AttnPrefill::run`) on
    /// these q rows and cache.
    pub fn run_rows(
        &self,
        q: &Queue,
        qrows: &[f32], // (t, n_head * hd)
        kc: &DeviceBuffer<f16>,
        vc: &DeviceBuffer<f16>,
        pos: &[i32], // (t)
        kernel: impl Fn(&AttnCall) -> strata::sycl::Result<()>,
    ) -> Vec<f32> {
        let t = pos.len();
        let (qd, pd) = (q.upload(qrows).unwrap(), q.upload(pos).unwrap());
        let out = q.alloc::<f32>(t * self.n_head * self.hd).unwrap();
        kernel(&self.call(&qd, kc, vc, &pd, &out, t)).unwrap();
        q.to_vec(&out).unwrap()
    }

    /// `attn::reference` at this case's shape over the host copies of the cache.
    pub fn reference(&self, qrows: &[f32], kh: &[f16], vh: &[f16], pos: &[i32]) -> Vec<f64> {
        attn::reference(
            qrows,
            kh,
            vh,
            pos,
            self.n_head,
            self.n_kv,
            self.hd,
            self.n_ctx,
            self.window,
            self.scale(),
        )
    }
}
