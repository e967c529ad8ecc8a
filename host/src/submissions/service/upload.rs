//! An agent's upload, read as it streams: refused before a byte is read
//! when its declared length is over the cap or it is not `application/wasm`,
//! cut off the moment it passes the cap, hashed on the way, and written to
//! a staging file that is removed unless it is kept.

use std::io::Write;
use std::path::{Path, PathBuf};

use hyper::StatusCode;
use hyper::body::Incoming;
use sha2::{Digest, Sha256};

use crate::http_server::{BodyDeadline, BodyError};

/// The content type an upload must have.
pub const CONTENT_TYPE: &str = "application/wasm";

/// A component read in full.
pub struct Received {
    /// Where it is, until kept or dropped.
    pub file: tempfile::TempPath,
    /// Its SHA-256, hex.
    pub sha256: String,
    /// Its size.
    pub bytes: u64,
}

/// Why an upload was not read, with the status it is answered with.
#[derive(Debug)]
pub struct Rejected(pub StatusCode, pub String);

/// Checks what the headers declare: the type, and a length within `cap`.
pub fn check_headers(headers: &hyper::HeaderMap, cap: u64) -> Result<(), Rejected> {
    let kind = headers
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if kind.split(';').next().map(str::trim) != Some(CONTENT_TYPE) {
        return Err(Rejected(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("content type `{kind}`: upload the component as {CONTENT_TYPE}"),
        ));
    }
    let declared = headers
        .get(hyper::header::CONTENT_LENGTH)
        .map(|v| v.to_str().ok().and_then(|v| v.parse::<u64>().ok()));
    match declared {
        Some(None) => Err(Rejected(
            StatusCode::BAD_REQUEST,
            "the Content-Length is not a number".into(),
        )),
        Some(Some(length)) if length > cap => Err(too_large(cap)),
        _ => Ok(()),
    }
}

fn too_large(cap: u64) -> Rejected {
    Rejected(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("the component is over this benchmark's cap of {} MiB", cap >> 20),
    )
}

/// Reads `body` into a file under `staging`, at most `cap` bytes, all of
/// it by `deadline`.
pub async fn receive(
    mut body: Incoming,
    staging: &Path,
    cap: u64,
    deadline: Option<BodyDeadline>,
) -> Result<Received, Rejected> {
    let failed = |e: std::io::Error| Rejected(StatusCode::INTERNAL_SERVER_ERROR, format!("staging the upload: {e}"));
    let (file, path) = tempfile::NamedTempFile::new_in(staging).map_err(failed)?.into_parts();
    let mut file = std::io::BufWriter::new(file);
    let mut hash = Sha256::new();
    let mut bytes = 0u64;
    loop {
        let frame = match crate::http_server::frame(&mut body, deadline).await {
            Ok(Some(frame)) => frame,
            Ok(None) => break,
            Err(late @ BodyError::Late(_)) => {
                return Err(Rejected(StatusCode::REQUEST_TIMEOUT, format!("the upload: {late}")));
            }
            Err(broken) => return Err(Rejected(StatusCode::BAD_REQUEST, format!("the upload: {broken}"))),
        };
        let Ok(data) = frame.into_data() else { continue };
        bytes += data.len() as u64;
        if bytes > cap {
            return Err(too_large(cap));
        }
        hash.update(&data);
        file.write_all(&data).map_err(failed)?;
    }
    if bytes == 0 {
        return Err(Rejected(
            StatusCode::BAD_REQUEST,
            "the upload is empty: send the component's bytes".into(),
        ));
    }
    file.into_inner()
        .map_err(|e| failed(e.into_error()))?
        .sync_all()
        .map_err(failed)?;
    Ok(Received {
        file: path,
        sha256: hex::encode(hash.finalize()),
        bytes,
    })
}

/// Keeps a received component as `target` (content-addressed: one copy
/// however often it is submitted).
pub fn keep(received: Received, target: &Path) -> std::io::Result<PathBuf> {
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent)?;
    }
    if !target.exists() {
        received.file.persist(target).map_err(|e| e.error)?;
    }
    Ok(target.to_path_buf())
}
