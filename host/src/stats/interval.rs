//! Confidence intervals from Student's t (statrs' quantiles).

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// The confidence level of every interval mlrb reports.
pub const LEVEL: f64 = 0.95;

/// A confidence interval and how it was made.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Interval {
    /// The lower end.
    pub lower: f64,
    /// The upper end.
    pub upper: f64,
    /// Its confidence level (0.95).
    pub level: f64,
}

/// Why there is no interval where the values themselves do not vary: a
/// standard error of zero (identical seeds) tells nothing of the spread.
pub const NO_SPREAD: &str = "no spread: the design cannot tell";

/// What a table shows for a missing interval: why, where it is the spread.
pub fn missing_interval(se: Option<f64>) -> &'static str {
    match se {
        Some(0.0) => NO_SPREAD,
        _ => "n/a",
    }
}

impl Interval {
    /// True when the interval holds `value`.
    pub fn contains(&self, value: f64) -> bool {
        self.lower <= value && value <= self.upper
    }
}

/// The `p` quantile of Student's t with `df` degrees of freedom; none for
/// fewer than one degree of freedom or `p` outside (0, 1).
pub fn t_quantile(p: f64, df: f64) -> Option<f64> {
    if df < 1.0 || !(p > 0.0 && p < 1.0) {
        return None;
    }
    StudentsT::new(0.0, 1.0, df).ok().map(|t| t.inverse_cdf(p))
}

/// mean ± t(1 − (1 − level) / 2, df) × se; none without a standard error
/// or a degree of freedom, and none for a standard error of zero: values
/// with no spread (identical seeds) say nothing of how far another draw
/// could land, and a zero-width interval would claim certainty.
pub fn t_interval(mean: f64, se: Option<f64>, df: usize, level: f64) -> Option<Interval> {
    let se = se.filter(|s| s.is_finite() && *s > 0.0)?;
    let t = t_quantile(1.0 - (1.0 - level) / 2.0, df as f64)?;
    Some(Interval {
        lower: mean - t * se,
        upper: mean + t * se,
        level,
    })
}

/// A mean over independent values with its standard error and t interval.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Estimate {
    /// The mean.
    pub mean: f64,
    /// Its standard error; none for fewer than two values.
    pub se: Option<f64>,
    /// mean ± t(0.975, n − 1) × se; none for fewer than two values or
    /// values that do not vary.
    pub interval: Option<Interval>,
    /// How many values.
    pub n: usize,
}

/// The [`Estimate`] of `values`; none for no values.
pub fn estimate(values: &[f64]) -> Option<Estimate> {
    let m = super::mean_se(values)?;
    Some(Estimate {
        mean: m.mean,
        se: m.se,
        interval: t_interval(m.mean, m.se, m.n.saturating_sub(1), LEVEL),
        n: m.n,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_match_scipy() {
        // scipy.stats.t.ppf(0.975, df) for df = 1, 2, 4; t.ppf(0.8, 4).
        for (p, df, expected) in [
            (0.975, 1.0, 12.706_204_736_432_095),
            (0.975, 2.0, 4.302_652_729_911_275),
            (0.975, 4.0, 2.776_445_105_197_798),
            (0.8, 4.0, 0.940_964_577_197_53),
        ] {
            let got = t_quantile(p, df).unwrap();
            assert!((got - expected).abs() < 1e-9, "t({p}, {df}) = {got}, scipy {expected}");
        }
        assert_eq!(t_quantile(0.975, 0.0), None);
        assert_eq!(t_quantile(1.0, 3.0), None);
    }

    #[test]
    fn a_t_interval_matches_scipy() {
        // [1, 2, 4]: mean 2.3333, sem 0.881917; scipy.stats.t.interval(0.95, 2, ...)
        // = (-1.4612497004061313, 6.127916367072798).
        let interval = t_interval(7.0 / 3.0, Some(0.881_917_103_688_196_9), 2, LEVEL).unwrap();
        assert!((interval.lower + 1.461_249_700_406_131_3).abs() < 1e-9, "{interval:?}");
        assert!((interval.upper - 6.127_916_367_072_798).abs() < 1e-9, "{interval:?}");
        assert!(interval.contains(0.0) && !interval.contains(7.0));
        assert_eq!(t_interval(1.0, None, 2, LEVEL), None);
        assert_eq!(t_interval(1.0, Some(0.5), 0, LEVEL), None);
        assert_eq!(t_interval(1.0, Some(0.0), 4, LEVEL), None, "no spread, no interval");
        assert_eq!(estimate(&[0.8, 0.8, 0.8]).unwrap().interval, None);
        let e = estimate(&[1.0, 2.0, 4.0]).unwrap();
        assert_eq!(e.n, 3);
        assert!((e.interval.unwrap().upper - 6.127_916_367_072_798).abs() < 1e-9);
        assert_eq!(estimate(&[5.0]).unwrap().interval, None);
    }
}
