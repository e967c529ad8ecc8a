//! The signature of a directory (or of the run it lies in), checked
//! against the key given or, without one, against the key it names.

use std::path::Path;

use super::Finding;
use crate::record::signature;

/// How the signature of `dir` checks out against `key`.
pub(super) fn finding(dir: &Path, key: Option<&Path>) -> Finding {
    let signed = dir.ancestors().find(|d| d.join(signature::FILE).is_file());
    let verified = |text: String| Finding {
        what: text,
        failures: Vec::new(),
        smoke: false,
    };
    let failed = |why: String| Finding {
        what: "signature".into(),
        failures: vec![why],
        smoke: false,
    };
    let trusted = match key.map(signature::read_public).transpose() {
        Ok(trusted) => trusted,
        Err(error) => return failed(format!("{error:#}")),
    };
    match (signed, &trusted) {
        (None, None) => verified("signature: none (unsigned; --key requires one)".into()),
        (None, Some(_)) => failed(format!("{}: not signed, and --key asks for a signature", dir.display())),
        (Some(signed), trusted) => match signature::check(signed, trusted.as_ref()) {
            Ok(key) if trusted.is_some() => verified(format!("signature by the key given ({})", &key[..16])),
            Ok(key) => verified(format!(
                "signature by key {} (self-consistent; pass --key to trust it)",
                &key[..16]
            )),
            Err(error) => failed(format!("{error:#}")),
        },
    }
}
