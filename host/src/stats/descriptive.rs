//! Descriptive statistics of one sample: mean with its standard error,
//! median, interquartile mean.

use serde::{Deserialize, Serialize};

/// A mean with its standard error (sample standard deviation / sqrt n).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct MeanSe {
    /// The mean of the values.
    pub mean: f64,
    /// Its standard error; none for fewer than two values.
    pub se: Option<f64>,
    /// How many values.
    pub n: usize,
}

/// The mean and its standard error of `values`; none for no values. An
/// error within rounding of zero (identical values whose mean rounds) is
/// zero: no spread.
pub fn mean_se(values: &[f64]) -> Option<MeanSe> {
    let n = values.len();
    let mean = mean(values)?;
    let se = sample_variance(values).map(|v| without_rounding((v / n as f64).sqrt(), values));
    Some(MeanSe { mean, se, n })
}

/// `se`, or exactly 0 where it is no larger than the rounding of sums of
/// `values` (0.1 three times sums to 0.30000000000000004).
pub fn without_rounding(se: f64, values: &[f64]) -> f64 {
    let scale = values.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
    if se <= 64.0 * f64::EPSILON * scale { 0.0 } else { se }
}

/// The mean of `values`; none for no values.
pub fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// The sample variance (n − 1 in the denominator); none for fewer than two values.
pub fn sample_variance(values: &[f64]) -> Option<f64> {
    let n = values.len();
    let mean = mean(values)?;
    (n > 1).then(|| values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64)
}

/// `values` in ascending order (NaN last).
pub fn sorted(values: &[f64]) -> Vec<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted
}

/// The median (the mean of the two middle values for an even count).
pub fn median(values: &[f64]) -> Option<f64> {
    let sorted = sorted(values);
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

/// The interquartile mean: the mean of the values left after cutting
/// floor(n / 4) from each end, as rliable computes it
/// (`scipy.stats.trim_mean(values, 0.25)`).
pub fn interquartile_mean(values: &[f64]) -> Option<f64> {
    let sorted = sorted(values);
    let cut = sorted.len() / 4;
    mean(&sorted[cut..sorted.len() - cut])
}

/// The `q` quantile (0 to 1) of ascending `sorted` values, interpolated
/// linearly between order statistics (numpy's default).
pub fn quantile_of_sorted(sorted: &[f64], q: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let position = q.clamp(0.0, 1.0) * last as f64;
    let below = position.floor() as usize;
    let above = (below + 1).min(last);
    let fraction = position - below as f64;
    Some(sorted[below] + (sorted[above] - sorted[below]) * fraction)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_standard_error() {
        assert_eq!(mean_se(&[]), None);
        // Identical values have no spread, whatever their mean rounds to.
        assert_eq!(mean_se(&[0.1, 0.1, 0.1]).unwrap().se, Some(0.0));
        assert!(mean_se(&[0.1, 0.1, 0.1 + 1e-9]).unwrap().se.unwrap() > 0.0);
        let one = mean_se(&[2.0]).unwrap();
        assert_eq!((one.mean, one.se, one.n), (2.0, None, 1));
        let many = mean_se(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert!((many.mean - 2.5).abs() < 1e-12);
        // Sample sd = 1.2910, / sqrt 4.
        assert!((many.se.unwrap() - 0.645_497).abs() < 1e-5);
    }

    #[test]
    fn median_and_interquartile_mean_match_numpy_and_scipy() {
        // np.median and scipy.stats.trim_mean(x, 0.25) of the same values.
        let x = [0.2, 0.5, 0.9, 1.4, 2.0, 3.1, 0.0, 7.5];
        assert!((median(&x).unwrap() - 1.15).abs() < 1e-12);
        assert!((interquartile_mean(&x).unwrap() - 1.2).abs() < 1e-12);
        let odd = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0];
        assert_eq!(median(&odd), Some(4.0));
        assert!((interquartile_mean(&odd).unwrap() - 3.8).abs() < 1e-12);
        // Fewer than four values: nothing is cut.
        assert_eq!(interquartile_mean(&[1.0, 5.0]), Some(3.0));
        assert_eq!(median(&[]), None);
        assert_eq!(interquartile_mean(&[]), None);
    }

    #[test]
    fn quantiles_interpolate_like_numpy() {
        let sorted = [1.0, 2.0, 4.0, 8.0];
        // np.quantile([1, 2, 4, 8], [0, 0.25, 0.5, 1]) = 1, 1.75, 3, 8
        assert_eq!(quantile_of_sorted(&sorted, 0.0), Some(1.0));
        assert!((quantile_of_sorted(&sorted, 0.25).unwrap() - 1.75).abs() < 1e-12);
        assert!((quantile_of_sorted(&sorted, 0.5).unwrap() - 3.0).abs() < 1e-12);
        assert_eq!(quantile_of_sorted(&sorted, 1.0), Some(8.0));
        assert_eq!(quantile_of_sorted(&[], 0.5), None);
    }
}
