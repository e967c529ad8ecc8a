//! What checking a submission's records found before it was ranked: the
//! scan's flags (`mlrb scan`) and whether its signed records verified
//! (`mlrb verify`), kept beside the submission for its leaderboard row.

use anyhow::Result;
use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};

use super::store::{Store, now_ms};

/// The checks of one submission's records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// Flags a reviewer should look at.
    pub review_flags: usize,
    /// Flags for information.
    pub info_flags: usize,
    /// `verified`, or what failed.
    pub verify: String,
}

impl Verdict {
    /// Whether `mlrb verify` passed.
    pub fn verified(&self) -> bool {
        self.verify == "verified"
    }

    /// The verdict as shown where the private part may not be: a failed
    /// verification says only that it failed, since its findings can quote
    /// a recorded or re-computed score.
    pub fn shown(&self, private: bool) -> Self {
        let mut shown = self.clone();
        if !private && !self.verified() {
            shown.verify = UNVERIFIED.into();
        }
        shown
    }
}

/// A failed verification, as shown before the version closes.
pub const UNVERIFIED: &str = "failed: the organisers have the findings";

impl Store {
    /// Records (or replaces, after a re-run) submission `id`'s verdict.
    pub fn set_verdict(&self, id: i64, verdict: &Verdict) -> Result<()> {
        self.change(|tx| {
            tx.execute(
                "INSERT OR REPLACE INTO verdicts (submission, review_flags, info_flags, verify, at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    id,
                    verdict.review_flags as i64,
                    verdict.info_flags as i64,
                    verdict.verify,
                    now_ms()
                ],
            )?;
            Ok(())
        })
    }

    /// Submission `id`'s verdict, once its records were checked.
    pub fn verdict(&self, id: i64) -> Result<Option<Verdict>> {
        self.read(|db| {
            Ok(db
                .query_row(
                    "SELECT review_flags, info_flags, verify FROM verdicts WHERE submission = ?1",
                    [id],
                    |r| {
                        Ok(Verdict {
                            review_flags: r.get::<_, i64>(0)? as usize,
                            info_flags: r.get::<_, i64>(1)? as usize,
                            verify: r.get(2)?,
                        })
                    },
                )
                .optional()?)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_verification_tells_its_findings_only_where_the_private_part_may_be_seen() {
        let failed = Verdict {
            review_flags: 1,
            info_flags: 2,
            verify: "failed (1 findings), first: digits/a/1: score 0.912 recomputed as 0.913".into(),
        };
        assert_eq!(failed.shown(false).verify, UNVERIFIED);
        assert_eq!(failed.shown(false).review_flags, 1);
        assert_eq!(failed.shown(true), failed);
        let verified = Verdict {
            verify: "verified".into(),
            ..failed
        };
        assert_eq!(verified.shown(false), verified);
    }
}
