//! llama-perplexity's `--kl-divergence-base` file and its `--kl-divergence` statistics, for
//! `strata nll --kld-base FILE` / `--kld FILE` (tools/perplexity/perplexity.cpp of llama.cpp
//! b11434, read, not copied): either tool writes a base the other can judge, and two Strata runs
//! (two flag sets) compare the same way.
//!
//! The file, little-endian, no padding:
//! - `_logits_` (8 bytes), n_ctx (u32), n_vocab (i32), n_chunk (i32);
//! - the evaluation tokens, n_chunk * n_ctx i32: the text tokenized with BOS (as the model adds
//!   one), cut into chunks of n_ctx; each chunk's first token is replaced by BOS when fed, but
//!   stored as it was;
//! - per chunk, one row per scored position (the second half: positions n_ctx/2 .. n_ctx-2, each
//!   predicting the next token), nv = 2 * ceil(n_vocab / 2) + 4 u16 per row: the f32 `scale`
//!   and `min_log_prob` (4 u16), then per vocabulary entry round((logit - min_logit) / scale)
//!   with min_logit clamped to max_logit - 16, so that log p = scale * q + min_log_prob; the
//!   padding entry (odd n_vocab) is 0.
//!
//! The arithmetic mirrors perplexity.cpp's: f32 logits and exps, the sum of exps in f64, its
//! log cast to f32, the round-half-even of `nearest_int`, probabilities below e^-16 left out of
//! the KLD sum. So a base written here reads in llama.cpp as one of its own.

use anyhow::{bail, Context, Result};
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"_logits_";
/// magic + n_ctx + n_vocab + n_chunk.
const HEADER_BYTES: u64 = 8 + 4 + 4 + 4;

/// u16 per stored row: 4 for the two f32 (scale, min_log_prob), n_vocab rounded up to even.
pub fn row_len(n_vocab: usize) -> usize {
    2 * n_vocab.div_ceil(2) + 4
}

/// Positions scored per chunk: llama-perplexity's second half, n_ctx/2 .. n_ctx-2 (the last
/// position predicts nothing in the chunk).
pub fn scored_rows(n_ctx: usize) -> usize {
    n_ctx.saturating_sub(1).saturating_sub(n_ctx / 2)
}

/// The first scored position of a chunk.
pub fn first_row(n_ctx: usize) -> usize {
    n_ctx / 2
}

/// perplexity.cpp's `nearest_int`: round half to even through the f32 mantissa (valid below
/// 2^22; the values here are at most 65535).
fn nearest_int(v: f32) -> i32 {
    let bits = (v + 12582912.0f32).to_bits() as i32;
    (bits & 0x007f_ffff) - 0x0040_0000
}

/// (max_logit, index of the first maximum, log of the sum of exp(l - max), in f32 as
/// perplexity.cpp keeps it).
fn max_and_lse(logits: &[f32]) -> (f32, usize, f32) {
    let (mut max, mut imax) = (logits[0], 0);
    for (i, &l) in logits.iter().enumerate().skip(1) {
        if l > max {
            (max, imax) = (l, i);
        }
    }
    let sum: f64 = logits.iter().map(|&l| (l - max).exp() as f64).sum();
    (max, imax, sum.ln() as f32)
}

/// One stored row from the logits of one position (n_vocab) into `row` (row_len(n_vocab) u16):
/// returns the negative log-likelihood of `target`.
pub fn encode_row(logits: &[f32], target: u32, row: &mut [u16]) -> f64 {
    let (max, _, lse) = max_and_lse(logits);
    let min = logits
        .iter()
        .fold(logits[0], |m, &l| m.min(l))
        .max(max - 16.0);
    let min_log_prob = min - max - lse;
    let scale = (max - min) / 65535.0;
    row[0..2].copy_from_slice(&u16_pair(scale));
    row[2..4].copy_from_slice(&u16_pair(min_log_prob));
    let q = &mut row[4..];
    q.fill(0);
    if scale != 0.0 {
        let inv = 1.0 / scale;
        for (o, &l) in q.iter_mut().zip(logits) {
            if l > min {
                // in 0..=65535 (l - min <= max - min = 65535 * scale), the float rounding aside
                *o = nearest_int(inv * (l - min)).clamp(0, 65535) as u16;
            }
        }
    }
    (max + lse - logits[target as usize]) as f64
}

/// An f32 as the two u16 words it occupies in memory (little-endian file).
fn u16_pair(v: f32) -> [u16; 2] {
    let b = v.to_le_bytes();
    [
        u16::from_le_bytes([b[0], b[1]]),
        u16::from_le_bytes([b[2], b[3]]),
    ]
}

fn f32_of(w: &[u16]) -> f32 {
    let (a, b) = (w[0].to_le_bytes(), w[1].to_le_bytes());
    f32::from_le_bytes([a[0], a[1], b[0], b[1]])
}

/// Writes a base file: header and tokens at `create`, then one `chunk` per evaluated chunk.
pub struct BaseWriter {
    out: BufWriter<File>,
    path: PathBuf,
    n_vocab: usize,
    row: Vec<u16>,  // (row_len(n_vocab),)
    bytes: Vec<u8>, // the row as written
}

impl BaseWriter {
    /// `tokens`: n_chunk * n_ctx evaluation tokens, as stored (not BOS-replaced).
    pub fn create(path: &Path, n_ctx: usize, n_vocab: usize, tokens: &[u32]) -> Result<Self> {
        let n_chunk = tokens.len() / n_ctx;
        if n_chunk == 0 || tokens.len() % n_ctx != 0 {
            bail!(
                "{}: {} tokens are not whole chunks of {n_ctx}",
                path.display(),
                tokens.len()
            );
        }
        let f = File::create(path).with_context(|| format!("creating {}", path.display()))?;
        let mut out = BufWriter::with_capacity(1 << 20, f);
        let mut head = Vec::with_capacity(HEADER_BYTES as usize + 4 * tokens.len());
        head.extend_from_slice(MAGIC);
        head.extend_from_slice(&(n_ctx as u32).to_le_bytes());
        head.extend_from_slice(&(n_vocab as i32).to_le_bytes());
        head.extend_from_slice(&(n_chunk as i32).to_le_bytes());
        for &t in tokens {
            head.extend_from_slice(&(t as i32).to_le_bytes());
        }
        out.write_all(&head)
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(Self {
            out,
            path: path.to_path_buf(),
            n_vocab,
            row: vec![0; row_len(n_vocab)],
            bytes: Vec::with_capacity(2 * row_len(n_vocab)),
        })
    }

    /// One chunk's scored rows: `logits[i]` (n_vocab) predicts `targets[i]`. Returns the sum of
    /// the rows' negative log-likelihoods.
    pub fn chunk(&mut self, logits: &[Vec<f32>], targets: &[u32]) -> Result<f64> {
        let mut nll = 0.0;
        for (l, &t) in logits.iter().zip(targets) {
            if l.len() != self.n_vocab {
                bail!(
                    "{}: a row of {} logits, the header says n_vocab {}",
                    self.path.display(),
                    l.len(),
                    self.n_vocab
                );
            }
            nll += encode_row(l, t, &mut self.row);
            self.bytes.clear();
            self.bytes
                .extend(self.row.iter().flat_map(|w| w.to_le_bytes()));
            self.out
                .write_all(&self.bytes)
                .with_context(|| format!("writing {}", self.path.display()))?;
        }
        Ok(nll)
    }

    pub fn finish(mut self) -> Result<()> {
        self.out
            .flush()
            .with_context(|| format!("writing {}", self.path.display()))
    }
}

/// A base file opened for reading: header and tokens checked against the file's length.
pub struct BaseReader {
    input: BufReader<File>,
    pub path: PathBuf,
    pub n_ctx: usize,
    pub n_vocab: usize,
    pub n_chunk: usize,
    /// (n_chunk * n_ctx,) the evaluation tokens as stored.
    pub tokens: Vec<u32>,
    bytes: Vec<u8>,
}

fn read_i32(r: &mut impl Read, path: &Path, field: &str) -> Result<i32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b).with_context(|| {
        format!(
            "{}: the file ends before its header field {field}",
            path.display()
        )
    })?;
    Ok(i32::from_le_bytes(b))
}

impl BaseReader {
    pub fn open(path: &Path) -> Result<Self> {
        let f = File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let len = f
            .metadata()
            .with_context(|| format!("reading {}", path.display()))?
            .len();
        let mut input = BufReader::with_capacity(1 << 20, f);
        let mut magic = [0u8; 8];
        if input.read_exact(&mut magic).is_err() || &magic != MAGIC {
            bail!(
                "{}: not a llama-perplexity --kl-divergence-base file (it does not start with \
                 \"_logits_\")",
                path.display()
            );
        }
        let n_ctx = read_i32(&mut input, path, "n_ctx")? as u32 as usize;
        let n_vocab = read_i32(&mut input, path, "n_vocab")?;
        let n_chunk = read_i32(&mut input, path, "n_chunk")?;
        if n_ctx < 3 || n_ctx > 1 << 24 {
            bail!(
                "{}: header field n_ctx = {n_ctx} (need 3 ..= 2^24)",
                path.display()
            );
        }
        if n_vocab < 1 {
            bail!("{}: header field n_vocab = {n_vocab}", path.display());
        }
        if n_chunk < 1 {
            bail!("{}: header field n_chunk = {n_chunk}", path.display());
        }
        let (n_vocab, n_chunk) = (n_vocab as usize, n_chunk as usize);
        let want = HEADER_BYTES
            + 4 * (n_chunk * n_ctx) as u64
            + 2 * (n_chunk * scored_rows(n_ctx) * row_len(n_vocab)) as u64;
        if len != want {
            bail!(
                "{}: {len} bytes, but its header (n_ctx {n_ctx}, n_vocab {n_vocab}, n_chunk \
                 {n_chunk}) makes {want}: truncated or not a base file",
                path.display()
            );
        }
        let mut raw = vec![0u8; 4 * n_chunk * n_ctx];
        input
            .read_exact(&mut raw)
            .with_context(|| format!("{}: reading the tokens", path.display()))?;
        let mut tokens = Vec::with_capacity(n_chunk * n_ctx);
        for (i, b) in raw.chunks_exact(4).enumerate() {
            let t = i32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            if t < 0 || t as usize >= n_vocab {
                bail!(
                    "{}: token {i} is {t}, outside the file's vocabulary (n_vocab {n_vocab})",
                    path.display()
                );
            }
            tokens.push(t as u32);
        }
        Ok(Self {
            input,
            path: path.to_path_buf(),
            n_ctx,
            n_vocab,
            n_chunk,
            tokens,
            bytes: Vec::new(),
        })
    }

    /// The next chunk's rows into `rows` (scored_rows(n_ctx) * row_len(n_vocab) u16).
    pub fn chunk(&mut self, rows: &mut Vec<u16>) -> Result<()> {
        let n = scored_rows(self.n_ctx) * row_len(self.n_vocab);
        self.bytes.resize(2 * n, 0);
        self.input.read_exact(&mut self.bytes).with_context(|| {
            format!(
                "{}: reading a chunk's log-probabilities",
                self.path.display()
            )
        })?;
        rows.clear();
        rows.extend(
            self.bytes
                .chunks_exact(2)
                .map(|b| u16::from_le_bytes([b[0], b[1]])),
        );
        Ok(())
    }
}

/// perplexity.cpp's `kl_divergence_result` and the per-position values it sorts.
#[derive(Default)]
pub struct Kld {
    sum_nll: f64,
    sum_nll2: f64,
    sum_nll_base: f64,
    sum_nll_base2: f64,
    sum_nll_nll_base: f64,
    sum_kld: f64,
    sum_kld2: f64,
    sum_p_diff: f64,
    sum_p_diff2: f64,
    sum_p_diff4: f64,
    max_p_diff: f32,
    pub n_same_top: usize,
    pub count: usize,
    kld_values: Vec<f32>,
    p_diff_values: Vec<f32>,
}

/// (mean, its standard error) as perplexity.cpp's `mean_and_uncertainty`.
fn mean_err(sum: f64, sum2: f64, count: usize) -> (f64, f64) {
    if count < 1 {
        return (0.0, 0.0);
    }
    let f = sum / count as f64;
    let df = sum2 / count as f64 - f * f;
    let df = if df > 0.0 && count > 10 {
        (df / (count - 1) as f64).sqrt()
    } else {
        0.0
    };
    (f, df)
}

/// perplexity.cpp's linear-interpolated percentile of sorted values.
fn percentile(v: &[f32], fraction: f32) -> f32 {
    if fraction <= 0.0 {
        return v[0];
    }
    if fraction >= 1.0 {
        return v[v.len() - 1];
    }
    let p = fraction * (v.len() - 1) as f32;
    let ip = p as usize;
    let p = p - ip as f32;
    (1.0 - p) * v[ip] + p * v[(ip + 1).min(v.len() - 1)]
}

fn median(v: &[f32]) -> f32 {
    let n = v.len();
    if n % 2 == 0 {
        0.5 * (v[n / 2] + v[n / 2 - 1])
    } else {
        v[n / 2]
    }
}

/// The summary a test or script reads: the goal's two numbers and the rest of the table.
#[derive(Debug, Clone, Copy)]
pub struct Summary {
    pub mean_kld: f64,
    pub mean_kld_err: f64,
    pub same_top: f64,
    pub rms_dp: f64,
    pub count: usize,
}

impl Kld {
    /// One position: this run's `logits` (n_vocab) against the base's stored `row`
    /// (row_len(n_vocab) u16), predicting `target`.
    pub fn add(&mut self, logits: &[f32], row: &[u16], target: u32) {
        let (max, imax, lse) = max_and_lse(logits);
        let scale = f32_of(&row[0..2]);
        let min_log_prob = f32_of(&row[2..4]);
        let q = &row[4..];
        let nll = max + lse - logits[target as usize];
        let nll_base = -(scale * q[target as usize] as f32 + min_log_prob);
        self.sum_nll += nll as f64;
        self.sum_nll2 += (nll * nll) as f64;
        self.sum_nll_base += nll_base as f64;
        self.sum_nll_base2 += (nll_base * nll_base) as f64;
        self.sum_nll_nll_base += (nll * nll_base) as f64;
        let log_norm = max + lse;
        let (mut sum, mut imax_base, mut lb_max) = (0f64, 0usize, 0f32);
        for (i, (&qi, &l)) in q.iter().zip(logits).enumerate() {
            let lb = scale * qi as f32 + min_log_prob;
            if i == 0 || lb > lb_max {
                (lb_max, imax_base) = (lb, i);
            }
            if lb > -16.0 {
                sum += (lb.exp() * (lb - l + log_norm)) as f64;
            }
        }
        self.sum_kld += sum;
        self.sum_kld2 += sum * sum;
        self.count += 1;
        self.n_same_top += usize::from(imax == imax_base);
        let p_diff = (-nll).exp() - (-nll_base).exp();
        let d2 = (p_diff * p_diff) as f64;
        self.sum_p_diff += p_diff as f64;
        self.sum_p_diff2 += d2;
        self.sum_p_diff4 += d2 * d2;
        self.max_p_diff = self.max_p_diff.max(p_diff.abs());
        self.kld_values.push(sum as f32);
        self.p_diff_values.push(p_diff);
    }

    pub fn summary(&self) -> Summary {
        let (mean_kld, mean_kld_err) = mean_err(self.sum_kld, self.sum_kld2, self.count);
        let (mse, _) = mean_err(self.sum_p_diff2, self.sum_p_diff4, self.count);
        Summary {
            mean_kld,
            mean_kld_err,
            same_top: self.n_same_top as f64 / self.count.max(1) as f64,
            rms_dp: mse.sqrt(),
            count: self.count,
        }
    }

    /// llama-perplexity's three closing tables, the same labels and formats (so one parser
    /// reads either tool's), then one `KLD summary:` line.
    pub fn report(&mut self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        if self.count == 0 {
            return "no position scored\n".into();
        }
        let n = self.count;
        self.kld_values.sort_by(f32::total_cmp);
        self.p_diff_values.sort_by(f32::total_cmp);
        // writing into a String cannot fail
        let mut w = |line: String| {
            let _ = writeln!(s, "{line}");
        };
        w("====== Perplexity statistics ======".into());
        let lp = mean_err(self.sum_nll, self.sum_nll2, n);
        let (ppl, ppl_unc) = (lp.0.exp(), lp.0.exp() * lp.1);
        w(format!(
            "Mean PPL(Q)                   : {ppl:10.6} ± {ppl_unc:10.6}"
        ));
        let lb = mean_err(self.sum_nll_base, self.sum_nll_base2, n);
        let (pb, pb_unc) = (lb.0.exp(), lb.0.exp() * lb.1);
        w(format!(
            "Mean PPL(base)                : {pb:10.6} ± {pb_unc:10.6}"
        ));
        let cov = if n < 10 {
            0.0
        } else {
            (self.sum_nll_nll_base / n as f64
                - (self.sum_nll / n as f64) * (self.sum_nll_base / n as f64))
                / (n - 1) as f64
        };
        w(format!(
            "Cor(ln(PPL(Q)), ln(PPL(base))): {:6.2}%",
            100.0 * cov / (lp.1 * lb.1)
        ));
        let r = lp.0 - lb.0;
        let r_unc = (lp.1 * lp.1 + lb.1 * lb.1 - 2.0 * cov).max(0.0).sqrt();
        w(format!(
            "Mean ln(PPL(Q)/PPL(base))     : {r:10.6} ± {r_unc:10.6}"
        ));
        w(format!(
            "Mean PPL(Q)/PPL(base)         : {:10.6} ± {:10.6}",
            r.exp(),
            r.exp() * r_unc
        ));
        let d_unc = (ppl_unc * ppl_unc + pb_unc * pb_unc - 2.0 * ppl * pb * cov)
            .max(0.0)
            .sqrt();
        w(format!(
            "Mean PPL(Q)-PPL(base)         : {:10.6} ± {d_unc:10.6}",
            ppl - pb
        ));
        w(String::new());
        w("====== KL divergence statistics ======".into());
        let k = mean_err(self.sum_kld, self.sum_kld2, n);
        w(format!("Mean    KLD: {:10.6} ± {:10.6}", k.0, k.1));
        let kv = &self.kld_values;
        w(format!("Maximum KLD: {:10.6}", kv[kv.len() - 1]));
        for (label, f) in [
            ("99.9%", 0.999),
            ("99.0%", 0.99),
            ("95.0%", 0.95),
            ("90.0%", 0.9),
        ] {
            w(format!("{label}   KLD: {:10.6}", percentile(kv, f)));
        }
        w(format!("Median  KLD: {:10.6}", median(kv)));
        for (label, f) in [
            ("10.0%", 0.1),
            (" 5.0%", 0.05),
            (" 1.0%", 0.01),
            (" 0.1%", 0.001),
        ] {
            w(format!("{label}   KLD: {:10.6}", percentile(kv, f)));
        }
        w(format!("Minimum KLD: {:10.6}", kv[0]));
        w(String::new());
        w("====== Token probability statistics ======".into());
        let pd = mean_err(self.sum_p_diff, self.sum_p_diff2, n);
        w(format!(
            "Mean    Δp: {:6.3} ± {:5.3} %",
            100.0 * pd.0,
            100.0 * pd.1
        ));
        let pv = &self.p_diff_values;
        w(format!("Maximum Δp: {:6.3}%", 100.0 * pv[pv.len() - 1]));
        for (label, f) in [
            ("99.9%", 0.999),
            ("99.0%", 0.99),
            ("95.0%", 0.95),
            ("90.0%", 0.9),
            ("75.0%", 0.75),
        ] {
            w(format!("{label}   Δp: {:6.3}%", 100.0 * percentile(pv, f)));
        }
        w(format!("Median  Δp: {:6.3}%", 100.0 * median(pv)));
        for (label, f) in [
            ("25.0%", 0.25),
            ("10.0%", 0.1),
            (" 5.0%", 0.05),
            (" 1.0%", 0.01),
            (" 0.1%", 0.001),
        ] {
            w(format!("{label}   Δp: {:6.3}%", 100.0 * percentile(pv, f)));
        }
        w(format!("Minimum Δp: {:6.3}%", 100.0 * pv[0]));
        let (mse, mse_unc) = mean_err(self.sum_p_diff2, self.sum_p_diff4, n);
        let rms = mse.sqrt();
        let rms_unc = if rms > 0.0 { 0.5 / rms * mse_unc } else { 0.0 };
        w(format!(
            "RMS Δp    : {:6.3} ± {:5.3} %",
            100.0 * rms,
            100.0 * rms_unc
        ));
        let top = self.n_same_top as f64 / n as f64;
        let top_unc = if n > 1 {
            (top * (1.0 - top) / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        w(format!(
            "Same top p: {:6.3} ± {:5.3} %",
            100.0 * top,
            100.0 * top_unc
        ));
        let sm = self.summary();
        w(format!(
            "KLD summary: mean {:.6} ± {:.6}, same top p {:.3} %, RMS Δp {:.3} %, max {:.6}, \
             99.0% {:.6}, median {:.6}, {} positions",
            sm.mean_kld,
            sm.mean_kld_err,
            100.0 * sm.same_top,
            100.0 * sm.rms_dp,
            kv[kv.len() - 1],
            percentile(kv, 0.99),
            median(kv),
            n
        ));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_int_rounds_half_to_even() {
        assert_eq!(
            [0.5f32, 1.5, 2.5, 2.4999, 65534.5, 65535.0].map(nearest_int),
            [0, 2, 2, 2, 65534, 65535]
        );
    }

    #[test]
    fn a_row_decodes_to_its_log_softmax() {
        let logits: Vec<f32> = (0..7).map(|i| (i as f32 * 1.7).sin() * 5.0).collect();
        let mut row = vec![0u16; row_len(7)];
        assert_eq!(row.len(), 12);
        let nll = encode_row(&logits, 3, &mut row);
        let (scale, mlp) = (f32_of(&row[0..2]), f32_of(&row[2..4]));
        let lse = logits.iter().map(|&l| (l as f64).exp()).sum::<f64>().ln();
        for (i, &l) in logits.iter().enumerate() {
            let got = scale * row[4 + i] as f32 + mlp;
            let err = (got as f64 - (l as f64 - lse)).abs();
            assert!(
                err <= scale as f64,
                "entry {i}: {got} vs {} ({err})",
                l as f64 - lse
            );
        }
        assert!((nll - (lse - logits[3] as f64)).abs() < 1e-5, "{nll}");
        assert_eq!(row[11], 0, "the padding entry");
    }
}
