//! Reducers of one task's seeds (its epochs): pass@k and best-of-k, each
//! the unbiased estimate from the n seeds run, and at-least-k successes.

use statrs::function::factorial::binomial;

/// pass@k: the chance that at least one of k seeds drawn (without
/// replacement) from the n run succeeds, given c of them did:
/// 1 − C(n − c, k) / C(n, k) (Chen et al., 2021), as a stable product.
/// None for k = 0 or k > n.
pub fn pass_at_k(n: usize, c: usize, k: usize) -> Option<f64> {
    if k == 0 || k > n || c > n {
        return None;
    }
    if n - c < k {
        return Some(1.0);
    }
    let all_fail: f64 = (n - c + 1..=n).map(|i| 1.0 - k as f64 / i as f64).product();
    Some(1.0 - all_fail)
}

/// at-least-k (Inspect's reducer): 1 when at least k of the seeds
/// succeeded, else 0; none for k = 0 or k > n.
pub fn at_least_k(n: usize, c: usize, k: usize) -> Option<f64> {
    (k > 0 && k <= n).then_some(if c >= k { 1.0 } else { 0.0 })
}

/// best-of-k: the expected best of k seeds drawn (without replacement)
/// from `values` (oriented so that higher is better): the i-th smallest
/// value weighted by C(i − 1, k − 1) / C(n, k). None for k = 0 or k > n.
pub fn best_of_k(values: &[f64], k: usize) -> Option<f64> {
    let n = values.len();
    if k == 0 || k > n {
        return None;
    }
    let sorted = super::sorted(values);
    let total = binomial(n as u64, k as u64);
    Some(
        (k..=n)
            .map(|i| sorted[i - 1] * binomial((i - 1) as u64, (k - 1) as u64) / total)
            .sum(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pass_at_k_is_the_unbiased_estimator() {
        // n = 5, c = 2: pass@1 = 2/5; pass@2 = 1 − C(3,2)/C(5,2) = 1 − 3/10;
        // pass@3 = 1 − C(3,3)/C(5,3) = 1 − 1/10; pass@4 = 1 (only 3 fail).
        let close = |a: Option<f64>, b: f64| (a.unwrap() - b).abs() < 1e-12;
        assert!(close(pass_at_k(5, 2, 1), 0.4));
        assert!(close(pass_at_k(5, 2, 2), 0.7));
        assert!(close(pass_at_k(5, 2, 3), 0.9));
        assert!(close(pass_at_k(5, 2, 4), 1.0));
        assert!(close(pass_at_k(3, 0, 3), 0.0));
        assert_eq!(pass_at_k(3, 1, 0), None);
        assert_eq!(pass_at_k(3, 1, 4), None);
    }

    #[test]
    fn at_least_k_is_one_when_k_seeds_succeeded() {
        assert_eq!(at_least_k(3, 2, 2), Some(1.0));
        assert_eq!(at_least_k(3, 2, 3), Some(0.0));
        assert_eq!(at_least_k(3, 2, 0), None);
        assert_eq!(at_least_k(3, 3, 4), None);
    }

    #[test]
    fn best_of_k_averages_the_best_of_every_draw() {
        // [1, 4, 2]: draws of two: {1,4} 4, {1,2} 2, {4,2} 4 → 10/3.
        let values = [1.0, 4.0, 2.0];
        assert!((best_of_k(&values, 2).unwrap() - 10.0 / 3.0).abs() < 1e-12);
        assert!((best_of_k(&values, 1).unwrap() - 7.0 / 3.0).abs() < 1e-12);
        assert_eq!(best_of_k(&values, 3), Some(4.0));
        assert_eq!(best_of_k(&values, 4), None);
    }
}
