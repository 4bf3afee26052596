//! The few statistics an A/B reports: the median and the spread of a sample.

use serde::Serialize;

/// A sample's median and spread (min, quartiles, max) and size.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    pub n: usize,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// Lower and upper quartiles (linear interpolation between order statistics).
    pub q1: f64,
    pub q3: f64,
}

/// The q-quantile (0..=1) of sorted values, interpolating between neighbours.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

impl Spread {
    /// None for an empty sample; NaN values are left out.
    pub fn of(values: &[f64]) -> Option<Spread> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        Some(Spread {
            n: v.len(),
            median: quantile(&v, 0.5),
            min: v[0],
            max: v[v.len() - 1],
            q1: quantile(&v, 0.25),
            q3: quantile(&v, 0.75),
        })
    }
}

/// `b / a`, None when `a` is 0.
pub fn ratio(a: f64, b: f64) -> Option<f64> {
    (a != 0.0).then(|| b / a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_quartiles() {
        let s = Spread::of(&[5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!(
            (s.n, s.median, s.min, s.max, s.q1, s.q3),
            (5, 3.0, 1.0, 5.0, 2.0, 4.0)
        );
        let e = Spread::of(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!((e.median, e.q1, e.q3), (2.5, 1.75, 3.25));
        assert_eq!(Spread::of(&[]), None);
        assert_eq!(Spread::of(&[f64::NAN, 7.0]).unwrap().median, 7.0);
        assert_eq!(ratio(2.0, 3.0), Some(1.5));
        assert_eq!(ratio(0.0, 3.0), None);
    }
}
