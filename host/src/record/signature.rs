//! Signed run directories: `SIGNATURE.json` lists the blake3 of every file
//! of a run (or episode) directory and an ed25519 signature over that list.
//! Snapshot objects and trees are not listed: each is named by its own
//! hash, checked by `mlrb verify`, and bound through the manifests' roots
//! in the signed hash chain.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};
use serde::{Deserialize, Serialize};

/// The signature file's name.
pub const FILE: &str = "SIGNATURE.json";

/// What `SIGNATURE.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SignedList {
    /// Always "ed25519".
    pub algorithm: String,
    /// The signer's public key, hex.
    pub public_key: String,
    /// Each file (relative path) and its blake3, hex.
    pub files: BTreeMap<String, String>,
    /// The signature over [`SignedList::message`], hex.
    pub signature: String,
}

impl SignedList {
    /// The bytes signed: the algorithm, the key and every file with its hash.
    fn message(algorithm: &str, public_key: &str, files: &BTreeMap<String, String>) -> Vec<u8> {
        let body = serde_json::json!({ "algorithm": algorithm, "public_key": public_key, "files": files });
        serde_json::to_vec(&body).unwrap_or_default()
    }
}

/// A new key pair: the secret key file (hex seed, mode 0600) and `<file>.pub`.
pub fn keygen(secret: &Path) -> Result<PathBuf> {
    if secret.exists() {
        bail!(
            "{}: exists; choose another path (a key is never overwritten)",
            secret.display()
        );
    }
    let mut seed = [0u8; 32];
    getrandom::getrandom(&mut seed).map_err(|e| anyhow::anyhow!("reading the OS's randomness: {e}"))?;
    let key = SigningKey::from_bytes(&seed);
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(secret)
        .with_context(|| format!("{}: cannot create", secret.display()))?;
    writeln!(file, "{}", hex::encode(seed))?;
    let public = public_path(secret);
    std::fs::write(&public, format!("{}\n", hex::encode(key.verifying_key().to_bytes())))
        .with_context(|| format!("{}: cannot write", public.display()))?;
    Ok(public)
}

/// Where the public key of `secret` is written.
pub fn public_path(secret: &Path) -> PathBuf {
    let mut name = secret.as_os_str().to_owned();
    name.push(".pub");
    PathBuf::from(name)
}

fn read_hex<const N: usize>(path: &Path, what: &str) -> Result<[u8; N]> {
    let text =
        super::read_record_file(path, 4096).with_context(|| format!("{}: cannot read the {what}", path.display()))?;
    let bytes = hex::decode(text.trim()).ok().and_then(|b| <[u8; N]>::try_from(b).ok());
    bytes.with_context(|| {
        format!(
            "{}: not an mlrb {what} ({N} bytes in hex, as `mlrb keygen` writes)",
            path.display()
        )
    })
}

/// Reads a public key file.
pub fn read_public(path: &Path) -> Result<VerifyingKey> {
    let bytes = read_hex::<32>(path, "public key")?;
    VerifyingKey::from_bytes(&bytes).with_context(|| format!("{}: not a valid ed25519 public key", path.display()))
}

/// The files a signature lists: every regular file and symbolic link under
/// `dir` but the signature itself and the content-addressed snapshot
/// objects, packs and trees (verify checks each against its name).
fn listed_files(dir: &Path) -> Result<BTreeMap<String, String>> {
    let mut files = BTreeMap::new();
    for entry in walkdir::WalkDir::new(dir).follow_links(false).sort_by_file_name() {
        let entry = entry.with_context(|| format!("{}: cannot list", dir.display()))?;
        let rel = entry.path().strip_prefix(dir).unwrap_or(entry.path());
        let parent = rel.parent().and_then(Path::file_name).and_then(|n| n.to_str());
        let in_store = rel.parent().and_then(Path::parent).and_then(Path::file_name) == Some("snapshots".as_ref())
            && matches!(parent, Some("objects" | "trees" | "packs"));
        if entry.file_type().is_dir() || in_store || rel == Path::new(FILE) {
            continue;
        }
        let rel_text = rel.to_string_lossy().into_owned();
        if entry.file_type().is_symlink() {
            // A link is recorded by its target, never followed.
            let target = std::fs::read_link(entry.path()).unwrap_or_default();
            files.insert(rel_text, format!("link:{}", target.display()));
            continue;
        }
        if !entry.file_type().is_file() {
            // A FIFO, a socket, a device: no content to sign (and none an
            // archive of the records holds).
            continue;
        }
        files.insert(rel_text, super::hash_record_file(entry.path())?);
    }
    Ok(files)
}

/// Signs `dir` with the secret key in `key`: writes `dir/SIGNATURE.json`.
pub fn sign(dir: &Path, key: &Path) -> Result<SignedList> {
    let key = SigningKey::from_bytes(&read_hex::<32>(key, "secret key")?);
    let public_key = hex::encode(key.verifying_key().to_bytes());
    let files = listed_files(dir)?;
    let signature = key.sign(&SignedList::message("ed25519", &public_key, &files));
    let list = SignedList {
        algorithm: "ed25519".into(),
        public_key,
        files,
        signature: hex::encode(signature.to_bytes()),
    };
    let path = dir.join(FILE);
    let tmp = dir.join(format!(".{FILE}.tmp"));
    std::fs::write(&tmp, serde_json::to_vec_pretty(&list)?)?;
    std::fs::rename(&tmp, &path)?;
    Ok(list)
}

/// Checks `dir/SIGNATURE.json`: the signature (by `trusted`, when given;
/// else by the key it names) and that every file is as signed, none added
/// or removed. Returns the signer's public key, hex; an error names the
/// first thing that does not hold.
pub fn check(dir: &Path, trusted: Option<&VerifyingKey>) -> Result<String> {
    let path = dir.join(FILE);
    if std::fs::symlink_metadata(&path).is_err() {
        bail!("{}: not signed (no {FILE}; sign it with `mlrb sign`)", dir.display());
    }
    let text = super::read_record_file(&path, super::MAX_JSON_RECORD)?;
    let list: SignedList = serde_json::from_str(&text).with_context(|| format!("{}: malformed", path.display()))?;
    if list.algorithm != "ed25519" {
        bail!("{}: algorithm `{}` is not ed25519", path.display(), list.algorithm);
    }
    let named = hex::decode(&list.public_key)
        .ok()
        .and_then(|b| <[u8; 32]>::try_from(b).ok())
        .and_then(|b| VerifyingKey::from_bytes(&b).ok())
        .with_context(|| format!("{}: its public key is malformed", path.display()))?;
    let key = trusted.unwrap_or(&named);
    if trusted.is_some_and(|t| t != &named) {
        bail!(
            "{}: signed by key {}, not by the key given",
            path.display(),
            &list.public_key[..16]
        );
    }
    let signature = hex::decode(&list.signature)
        .ok()
        .and_then(|b| <[u8; 64]>::try_from(b).ok())
        .map(|b| Signature::from_bytes(&b))
        .with_context(|| format!("{}: its signature is malformed", path.display()))?;
    key.verify(
        &SignedList::message(&list.algorithm, &list.public_key, &list.files),
        &signature,
    )
    .map_err(|_| anyhow::anyhow!("{}: the signature does not match its file list", path.display()))?;
    let now = listed_files(dir)?;
    for (file, hash) in &list.files {
        match now.get(file) {
            None => bail!("{}: signed file {file} is missing", dir.display()),
            Some(current) if current != hash => bail!("{}: {file} changed since it was signed", dir.display()),
            Some(_) => {}
        }
    }
    if let Some(added) = now.keys().find(|f| !list.files.contains_key(*f)) {
        bail!("{}: {added} was added after signing", dir.display());
    }
    Ok(list.public_key)
}
