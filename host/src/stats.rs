//! The statistics benchmark tables report: means with their standard
//! errors. One place, used by the bench's summary and every report.

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

/// The mean and its standard error of `values`; none for no values.
pub fn mean_se(values: &[f64]) -> Option<MeanSe> {
    let n = values.len();
    if n == 0 {
        return None;
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    let se = (n > 1).then(|| {
        let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        (variance / n as f64).sqrt()
    });
    Some(MeanSe { mean, se, n })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_standard_error() {
        assert_eq!(mean_se(&[]), None);
        let one = mean_se(&[2.0]).unwrap();
        assert_eq!((one.mean, one.se, one.n), (2.0, None, 1));
        let many = mean_se(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert!((many.mean - 2.5).abs() < 1e-12);
        // Sample sd = 1.2910, / sqrt 4.
        assert!((many.se.unwrap() - 0.645_497).abs() < 1e-5);
    }
}
