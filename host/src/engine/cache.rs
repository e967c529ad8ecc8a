//! The on-disk cache of compiled components: artifacts this host wrote,
//! each beside a MAC made with the cache's own key.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Compiled components on disk, keyed by the agent's sha256 and the engine's
/// compatibility hash. An artifact (`.cwasm`) is only loaded when its MAC
/// (`.mac`, beside it) was made with this cache's own key: wasmtime
/// deserialisation trusts its input, so a corrupted or foreign file must
/// never reach it. A verified artifact is mapped, not copied: the agent's
/// initial memory is then mapped copy-on-write straight from the file, which
/// is what makes a large (Python) agent start in milliseconds.
pub struct CompileCache {
    dir: PathBuf,
    key: [u8; 32],
    engine_hash: String,
}

impl CompileCache {
    /// Opens (creating if needed) the cache in `dir` for components of `engine`.
    pub fn open(dir: &Path, engine: &Engine) -> Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating the compile cache {}", dir.display()))?;
        let key = load_or_create_key(&dir.join("cache.key"))?;
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let engine_hash = format!("{:016x}", hasher.finish());
        Ok(Self {
            dir: dir.to_path_buf(),
            key,
            engine_hash,
        })
    }

    fn path_for(&self, sha256: &str) -> PathBuf {
        self.dir.join(format!("{sha256}-{}.cwasm", self.engine_hash))
    }

    /// The cached component, or `None` when absent or not verifiably ours.
    pub fn get(&self, engine: &Engine, sha256: &str) -> Result<Option<Component>> {
        let path = self.path_for(sha256);
        let (Ok(mac), Ok(file)) = (std::fs::read(path.with_extension("mac")), std::fs::File::open(&path)) else {
            return Ok(None);
        };
        // SAFETY: a read-only map of a file only this cache writes, and
        // always by rename, so its contents do not change under the map.
        let verified = match unsafe { memmap2::Mmap::map(&file) } {
            Ok(map) => blake3::keyed_hash(&self.key, &map).as_bytes().as_slice() == mac.as_slice(),
            Err(_) => false,
        };
        if !verified {
            tracing::warn!(path = %path.display(), "ignoring a compile-cache entry this host did not write");
            return Ok(None);
        }
        // SAFETY: the MAC proves this host's cache wrote the file from
        // `Engine::precompile_component`, for an engine with this compatibility hash.
        match unsafe { Component::deserialize_file(engine, &path) } {
            Ok(component) => {
                // Recently used entries survive `mlrb cache prune`.
                let _ = file.set_modified(std::time::SystemTime::now());
                Ok(Some(component))
            }
            Err(error) => {
                tracing::warn!(%error, "discarding an unusable compile-cache entry");
                Ok(None)
            }
        }
    }

    /// Removes entries of other engine versions, entries not used for
    /// `unused_for`, and temp files of interrupted writes; returns what was
    /// removed and its size in bytes.
    pub fn prune(&self, unused_for: std::time::Duration) -> Result<Vec<(PathBuf, u64)>> {
        let now = std::time::SystemTime::now();
        let mut removed = Vec::new();
        for entry in std::fs::read_dir(&self.dir)? {
            let entry = entry?;
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if name == "cache.key" {
                continue;
            }
            let meta = entry.metadata()?;
            let age = now.duration_since(meta.modified()?).unwrap_or_default();
            let ours = name.ends_with(&format!("-{}.cwasm", self.engine_hash));
            let stale = if name.ends_with(".cwasm") {
                !ours || age > unused_for
            } else if let Some(stem) = name.strip_suffix(".mac") {
                // A MAC goes with its artifact.
                let artifact = self.dir.join(format!("{stem}.cwasm"));
                let kept = stem.ends_with(&format!("-{}", self.engine_hash))
                    && std::fs::metadata(&artifact)
                        .and_then(|m| m.modified())
                        .is_ok_and(|t| now.duration_since(t).unwrap_or_default() <= unused_for);
                !kept
            } else {
                // An interrupted write's temp file.
                age > std::time::Duration::from_secs(3600)
            };
            if stale && meta.is_file() {
                std::fs::remove_file(&path)?;
                removed.push((path, meta.len()));
            }
        }
        Ok(removed)
    }

    /// Stores a compiled artifact and then its MAC, each atomically (temp
    /// file + rename), so concurrent hosts never see half a file; an
    /// artifact whose MAC is missing or stale is simply not used.
    pub fn put(&self, sha256: &str, compiled: &[u8]) -> Result<()> {
        use std::io::Write;
        let mut artifact = self.stage()?;
        artifact.write_all(compiled)?;
        self.keep(sha256, artifact)
    }

    /// A temp file in the cache's folder for an artifact being written:
    /// removed when dropped, so a compile that fails leaves nothing.
    pub fn stage(&self) -> Result<tempfile::NamedTempFile> {
        tempfile::NamedTempFile::new_in(&self.dir).context("staging a compile-cache entry")
    }

    /// Makes a staged artifact the entry of `sha256`: the artifact by
    /// rename, then its MAC (as `put`).
    pub fn keep(&self, sha256: &str, staged: tempfile::NamedTempFile) -> Result<()> {
        use std::io::Write;
        let path = self.path_for(sha256);
        // SAFETY: a read-only map of the staged file, which only this
        // process writes and which is complete (the compiler has exited).
        let map = unsafe { memmap2::Mmap::map(staged.as_file()) }.context("reading a compiled artifact")?;
        let tag = blake3::keyed_hash(&self.key, &map);
        drop(map);
        staged.persist(&path).context("writing a compile-cache entry")?;
        let mut mac = tempfile::NamedTempFile::new_in(&self.dir)?;
        mac.write_all(tag.as_bytes())?;
        mac.persist(path.with_extension("mac"))
            .context("writing a compile-cache entry")?;
        Ok(())
    }

    /// Removes the entry of `sha256`, if any (a component refused after it
    /// compiled is not kept).
    pub fn forget(&self, sha256: &str) {
        let path = self.path_for(sha256);
        let _ = std::fs::remove_file(path.with_extension("mac"));
        let _ = std::fs::remove_file(path);
    }

    /// Whether an entry (artifact or MAC) of `sha256` exists.
    pub fn holds(&self, sha256: &str) -> bool {
        let path = self.path_for(sha256);
        path.exists() || path.with_extension("mac").exists()
    }
}

fn load_or_create_key(path: &Path) -> Result<[u8; 32]> {
    if let Ok(bytes) = std::fs::read(path) {
        if let Ok(key) = <[u8; 32]>::try_from(bytes.as_slice()) {
            return Ok(key);
        }
        bail!(
            "compile cache key {} is damaged: delete the folder {} to start a fresh cache",
            path.display(),
            path.parent().unwrap_or(path).display()
        );
    }
    let mut key = [0u8; 32];
    use std::io::Read;
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut key))
        .context("reading /dev/urandom for the compile-cache key")?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    use std::io::Write;
    tmp.write_all(&key)?;
    // Another host may have raced us: keep whichever key landed first.
    match tmp.persist_noclobber(path) {
        Ok(_) => Ok(key),
        Err(_) => load_or_create_key(path),
    }
}
