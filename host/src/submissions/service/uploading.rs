//! One upload at a time per submitter: a second is refused before its body
//! is read, so one submitter never holds more than one staging file and
//! one compile slot, however many connections it opens.

use std::collections::HashSet;
use std::sync::Mutex;

/// The submitters with an upload being received or checked.
#[derive(Default)]
pub struct Uploading(Mutex<HashSet<i64>>);

/// A submitter's upload in progress; the place is given back when dropped
/// (the answer sent, or the client gone).
pub struct Held<'a> {
    set: &'a Uploading,
    submitter: i64,
}

impl Uploading {
    /// Takes `submitter`'s place, or `None` while another upload of theirs runs.
    pub fn hold(&self, submitter: i64) -> Option<Held<'_>> {
        let taken = self.0.lock().unwrap_or_else(|e| e.into_inner()).insert(submitter);
        // Built only when taken: a `Held` dropped gives the place back.
        taken.then(|| Held { set: self, submitter })
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let mut set = self.set.0.lock().unwrap_or_else(|e| e.into_inner());
        set.remove(&self.submitter);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_submitter_holds_one_place_until_it_is_dropped() {
        let uploading = Uploading::default();
        let first = uploading.hold(1).unwrap();
        assert!(uploading.hold(1).is_none(), "a second upload of the same submitter");
        assert!(uploading.hold(2).is_some(), "another submitter is not held up");
        drop(first);
        assert!(uploading.hold(1).is_some());
    }
}
