//! The statistics benchmark tables report, as pure functions: descriptive
//! (mean ± SE, median, interquartile mean), t intervals, the mean of
//! clustered observations with its clustered standard error, the
//! two-level bootstrap (shown from 20 tasks), rates with intervals inside
//! [0, 1] (Wilson, adjusted for clustering), paired comparison, pass@k and best-of-k, and
//! performance profiles with their area (AUP). Used by the bench's
//! summary, `mlrb compare` and every report.

pub mod bootstrap;
pub mod clustered;
pub mod descriptive;
pub mod interval;
pub mod paired;
pub mod passk;
pub mod profiles;
pub mod rate;

pub use bootstrap::Bootstrap;
pub use clustered::{Clustered, clustered_mean};
pub use descriptive::{MeanSe, interquartile_mean, mean, mean_se, median, quantile_of_sorted, sample_variance, sorted};
pub use interval::{Estimate, Interval, LEVEL, NO_SPREAD, estimate, missing_interval, t_interval, t_quantile};
pub use paired::{CannotTell, Paired, paired, probability_of_improvement, sign_test};
pub use rate::{Rate, clustered_rate, rate, wilson};
