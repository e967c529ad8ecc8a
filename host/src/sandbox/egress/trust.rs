//! The roots an agent's wasi:http trusts over HTTPS: the webpki roots, and
//! the certificates an organiser adds with `MLRB_EGRESS_CA` (a mirror inside
//! the cluster signed by its own CA). Scripts use their sandbox's own store.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use tokio_rustls::rustls::pki_types::CertificateDer;
use tokio_rustls::rustls::pki_types::pem::PemObject;

/// The variable naming a PEM file of roots to trust besides the webpki ones.
pub const CA_VARIABLE: &str = "MLRB_EGRESS_CA";

/// The organiser's extra roots (none when the variable is unset); an error
/// names the variable, the file and the fix.
pub fn extra_roots() -> Result<Vec<CertificateDer<'static>>> {
    let Some(path) = std::env::var_os(CA_VARIABLE)
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
    else {
        return Ok(Vec::new());
    };
    let shown = path.display();
    let text = std::fs::read(&path).with_context(|| format!("{CA_VARIABLE}: cannot read {shown}"))?;
    let roots = CertificateDer::pem_slice_iter(&text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!("{CA_VARIABLE}: {shown} is not PEM certificates: {e:?}"))?;
    if roots.is_empty() {
        bail!("{CA_VARIABLE}: {shown} holds no certificate (expected -----BEGIN CERTIFICATE----- blocks)");
    }
    Ok(roots)
}
