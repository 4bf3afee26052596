//! `llama` -> `strata-hc-llama`: the dense model with S hyper-connection streams.
//!
//! Each RMS norm `h = rms_norm(x) * w` (attn_norm, ffn_norm, output_norm) becomes a read site
//! (docs/hyper-connections.md) with
//!   gamma  = 2 w in every stream (F32: [n, S]; 2 w is exact in f32, so it is stored F32: in
//!            BF16 it would be rounded and the identity would not hold),
//!   W_down = W_up = W_inj = 0 (BF16),
//! which is the dense model exactly: with W_down = 0, lo = 0 and u = silu(0) = 0, so every gate
//! is sigmoid(0) = 1/2; with W_inj = 0 every injection is 2 sigmoid(0) = 1, so every stream
//! gets the same block output added and the S streams stay equal to the dense residual x; then
//! mixed = (1/S) sum_s (1/2) rms_norm(x) * 2 w = rms_norm(x) * w, the dense pre-norm.
//!
//! `Perturb` moves the three matrices off zero by seeded uniform values (no transcendental
//! function: the same bits on every platform), each scaled to what it feeds at the identity's
//! activations (vec(Ĥ) = the S normed streams, of RMS ~ rms(gamma)):
//!   W_down (r, S n): lo / S has std `down`       (entries std down * S / (sqrt(S n) rms(gamma)));
//!   W_inj  (S, S n): z / S has std `inject`      (the same scale): a = 2 sigmoid(z / S) ~ 1 +- inject / 2;
//!   W_up   (S n, r): gate logit has std `up` * rms(silu(lo / S)) (entries std up / sqrt(r)).
//! W_up only acts through lo (u = silu(lo / S) = 0 when W_down = 0) and W_down only through W_up
//! (the gate is 1/2 whatever lo is when W_up = 0): the read's gate needs both.

use super::{ConvertError, HcOptions};
use crate::gguf::{Array, GgmlType, Gguf, GgufWriter, HParams, Value, HC_LLAMA_ARCH as ARCH};
use crate::quant::{Bf16, QuantFormat};
use crate::sampling::SplitMix64;

/// The architecture this conversion reads.
const SOURCE_ARCH: &str = "llama";

/// The scales of the seeded perturbations (0 = identity); see the module comment for what each
/// one sets.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Perturb {
    pub down: f32,
    pub up: f32,
    pub inject: f32,
}

impl Perturb {
    /// The same scale for the three matrices (`strata convert --perturb X`).
    pub const fn uniform(x: f32) -> Perturb {
        Perturb {
            down: x,
            up: x,
            inject: x,
        }
    }
}

/// FNV-1a over the name: a fixed, documented hash (std's `Hasher`s promise no stability).
fn fnv1a(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// `n` values uniform on [-sqrt 3, sqrt 3) * std (variance std^2) from the tensor's own stream
/// (seed, name): 24-bit fractions and exactly rounded products only.
fn uniforms(seed: u64, name: &str, n: usize, std: f32) -> Vec<f32> {
    if std == 0.0 {
        return vec![0.0; n];
    }
    // one SplitMix step decorrelates nearby seeds before the name's hash is mixed in
    let mut s = SplitMix64::new(seed);
    let mut r = SplitMix64::new(s.next_u64() ^ fnv1a(name));
    let scale = 1.732_050_8_f32 * std;
    (0..n)
        .map(|_| {
            // (x >> 40) < 2^24: exact in f32; the fraction is exact, and so is the shift to [-1, 1)
            let u = (r.next_u64() >> 40) as f32 * (1.0 / 8_388_608.0) - 1.0;
            u * scale
        })
        .collect()
}

struct Sites<'a> {
    src: &'a Gguf,
    o: &'a HcOptions,
    n: u64,
    w: GgufWriter,
    count: usize,
}

impl Sites<'_> {
    fn bf16(&mut self, name: &str, dims: &[u64], std: f64) -> Result<(), ConvertError> {
        let n = dims.iter().product::<u64>() as usize;
        let v = uniforms(self.o.seed, name, n, std as f32);
        self.w
            .add_tensor(name, dims, GgmlType::BF16, Bf16::quantize(&v)?)?;
        self.count += 1;
        Ok(())
    }

    /// The read site `{prefix}_{norm,down,up[,inject]}` that replaces the RMS norm `norm`.
    fn site(&mut self, norm: &str, prefix: &str, inject: bool) -> Result<(), ConvertError> {
        let info = self.src.tensor(norm)?;
        let data = self.src.tensor_data(info)?;
        let mut w = vec![0f32; self.n as usize];
        if info.dims != [self.n] {
            return Err(self.source_err(format!(
                "{norm} has dims {:?}, expected [{}]",
                info.dims, self.n
            )));
        }
        crate::quant::dequantize_by_type(info.ggml_type.id(), data, &mut w)?;
        let (s, r) = (u64::from(self.o.streams), u64::from(self.o.rank));
        let k = s * self.n;
        // doubling is exact in f32 (no norm weight is near f32::MAX)
        let gamma: Vec<f32> = (0..s).flat_map(|_| w.iter().map(|&x| 2.0 * x)).collect();
        let ms = gamma
            .iter()
            .map(|&g| f64::from(g) * f64::from(g))
            .sum::<f64>()
            / k as f64;
        let rms = ms.sqrt();
        if !(rms.is_finite() && rms > 0.0) {
            return Err(self.source_err(format!("{norm}: the weights' RMS is {rms}")));
        }
        let p = self.o.perturb;
        // entries' std so that lo / S (down) and z / S (inject) have std p at the identity
        let per_site = s as f64 / ((k as f64).sqrt() * rms);
        self.w
            .add_f32_tensor(format!("{prefix}_norm.weight"), &[self.n, s], &gamma)?;
        self.count += 1;
        self.bf16(
            &format!("{prefix}_down.weight"),
            &[k, r],
            f64::from(p.down) * per_site,
        )?;
        self.bf16(
            &format!("{prefix}_up.weight"),
            &[r, k],
            f64::from(p.up) / (r as f64).sqrt(),
        )?;
        if inject {
            self.bf16(
                &format!("{prefix}_inject.weight"),
                &[k, s],
                f64::from(p.inject) * per_site,
            )?;
        }
        Ok(())
    }

    fn source_err(&self, why: String) -> ConvertError {
        ConvertError::Source {
            file: file_name(self.src),
            why,
        }
    }
}

fn file_name(g: &Gguf) -> String {
    g.path()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "(in memory)".into())
}

/// The metadata: the source's, `llama.*` renamed to `strata-hc-llama.*`, the architecture and
/// name changed, plus the hyper-connection keys and how the file was made (`strata.convert.*`).
fn keys(w: &mut GgufWriter, src: &Gguf, o: &HcOptions) -> Result<(), ConvertError> {
    let source_name = src
        .opt_str("general.name")?
        .map(str::to_string)
        .unwrap_or_else(|| file_name(src));
    for (key, value) in src.metadata() {
        match key {
            "general.architecture" => {
                w.set(key, ARCH)?;
            }
            "general.name" => {
                w.set(
                    key,
                    format!(
                        "{source_name} + hyper-connections ({} streams, rank {})",
                        o.streams, o.rank
                    )
                    .as_str(),
                )?;
            }
            _ => match key.strip_prefix("llama.") {
                Some(rest) => {
                    w.set(format!("{ARCH}.{rest}"), value.clone())?;
                }
                None => {
                    w.set(key, value.clone())?;
                }
            },
        };
    }
    w.set(format!("{ARCH}.hyper_connection.count"), o.streams)?;
    w.set(format!("{ARCH}.hyper_connection.low_rank"), o.rank)?;
    w.set("strata.convert.source", source_name.as_str())?;
    w.set("strata.convert.seed", o.seed)?;
    let p = o.perturb;
    w.set(
        "strata.convert.perturb",
        Value::Array(Array::F32(vec![p.down, p.up, p.inject])),
    )?;
    Ok(())
}

/// The converted file, ready to write.
pub fn build(src: &Gguf, o: &HcOptions) -> Result<GgufWriter, ConvertError> {
    Ok(build_counted(src, o)?.0)
}

/// `build` and the number of tensors it holds.
pub(super) fn build_counted(
    src: &Gguf,
    o: &HcOptions,
) -> Result<(GgufWriter, usize), ConvertError> {
    o.validate()?;
    let arch = src.architecture()?;
    if arch != SOURCE_ARCH {
        return Err(ConvertError::Source {
            file: file_name(src),
            why: format!(
                "general.architecture is \"{arch}\"; --to hc converts \"{SOURCE_ARCH}\" files"
            ),
        });
    }
    let hp = HParams::from_gguf(src)?;
    let mut t = Sites {
        src,
        o,
        n: u64::from(hp.embedding_length),
        w: GgufWriter::new(),
        count: 0,
    };
    keys(&mut t.w, src, o)?;
    let mut sites = 0usize;
    for info in src.tensors() {
        let name = info.name.as_str();
        let site = if name == "output_norm.weight" {
            Some(("output_hc".to_string(), false))
        } else {
            name.strip_prefix("blk.").and_then(|rest| {
                let (il, what) = rest.split_once('.')?;
                match what {
                    "attn_norm.weight" => Some((format!("blk.{il}.hc_attn"), true)),
                    "ffn_norm.weight" => Some((format!("blk.{il}.hc_ffn"), true)),
                    _ => None,
                }
            })
        };
        match site {
            Some((prefix, inject)) => {
                t.site(name, &prefix, inject)?;
                sites += 1;
            }
            None => {
                let data = src.tensor_data(info)?;
                t.w.add_tensor(name, &info.dims, info.ggml_type, data.to_vec())?;
                t.count += 1;
            }
        }
    }
    let want = 2 * hp.block_count as usize + 1;
    if sites != want {
        return Err(t.source_err(format!(
            "{sites} RMS norms (attn_norm, ffn_norm, output_norm), expected {want} for {} blocks",
            hp.block_count
        )));
    }
    Ok((t.w, t.count))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniforms_have_the_asked_moments_and_are_seeded_per_tensor() {
        let v = uniforms(7, "blk.0.hc_attn_up.weight", 100_000, 0.5);
        let mean = v.iter().map(|&x| f64::from(x)).sum::<f64>() / v.len() as f64;
        let var = v.iter().map(|&x| f64::from(x).powi(2)).sum::<f64>() / v.len() as f64;
        println!("mean {mean:.2e} std {:.4}", var.sqrt());
        assert!(mean.abs() < 0.01);
        assert!((var.sqrt() - 0.5).abs() < 0.005);
        let bound = 1.732_050_8 * 0.5;
        assert!(v.iter().all(|&x| (-bound..bound).contains(&x)));
        assert_eq!(v, uniforms(7, "blk.0.hc_attn_up.weight", 100_000, 0.5));
        assert_ne!(v[..16], uniforms(8, "blk.0.hc_attn_up.weight", 16, 0.5)[..]);
        assert_ne!(v[..16], uniforms(7, "blk.1.hc_attn_up.weight", 16, 0.5)[..]);
        assert!(uniforms(7, "x", 8, 0.0).iter().all(|&x| x == 0.0));
    }
}
