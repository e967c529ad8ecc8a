//! The wasmtime engine (one per process), its epoch ticker and the on-disk
//! cache of compiled components.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use wasmtime::component::Component;
use wasmtime::{Config, Engine};

/// How often the epoch advances. Each tick lets a running agent yield to the
/// async runtime, so agents share threads fairly and deadlines are noticed.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// The process-wide engine plus the thread that advances its epoch.
pub struct AgentEngine {
    engine: Engine,
    stop_ticker: Arc<AtomicBool>,
    cache: CompileCache,
}

impl AgentEngine {
    /// Builds the engine with epoch interruption, async support and the
    /// compile cache at `cache_dir`.
    pub fn new(cache_dir: &Path) -> Result<Self> {
        let mut config = Config::new();
        config.epoch_interruption(true);
        config.wasm_component_model(true);
        // Guests must not be able to exhaust the host's own stack.
        config.max_wasm_stack(2 << 20);
        let engine = Engine::new(&config).map_err(anyhow::Error::from)?;
        let stop_ticker = Arc::new(AtomicBool::new(false));
        {
            let engine = engine.clone();
            let stop = stop_ticker.clone();
            std::thread::Builder::new()
                .name("mlrb-epoch".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(EPOCH_TICK);
                        engine.increment_epoch();
                    }
                })
                .context("starting the epoch ticker thread")?;
        }
        let cache = CompileCache::open(&cache_dir.join("compiled"), &engine)?;
        Ok(Self {
            engine,
            stop_ticker,
            cache,
        })
    }

    /// The wasmtime engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The cache of compiled components.
    pub fn cache(&self) -> &CompileCache {
        &self.cache
    }

    /// Loads a component: from the compile cache when this host compiled it
    /// before, otherwise compiles it (off the async threads) and caches it.
    pub async fn load(&self, wasm: &[u8], sha256: &str) -> Result<LoadedComponent> {
        if let Some(component) = self.cache.get(&self.engine, sha256)? {
            return Ok(LoadedComponent {
                component,
                from_cache: true,
            });
        }
        let engine = self.engine.clone();
        let bytes = wasm.to_vec();
        let compiled = tokio::task::spawn_blocking(move || engine.precompile_component(&bytes))
            .await
            .context("compile task panicked")?
            .map_err(anyhow::Error::from)
            .map_err(describe_compile_error)?;
        let component = match self.cache.put(sha256, &compiled) {
            // Loaded back from the file: memory images map from it.
            Ok(()) => self.cache.get(&self.engine, sha256)?,
            Err(error) => {
                tracing::warn!(%error, "could not write the compile cache");
                None
            }
        };
        let component = match component {
            Some(component) => component,
            // SAFETY: `compiled` was produced by this engine just now.
            None => unsafe { Component::deserialize(&self.engine, &compiled) }.map_err(anyhow::Error::from)?,
        };
        Ok(LoadedComponent {
            component,
            from_cache: false,
        })
    }
}

impl Drop for AgentEngine {
    fn drop(&mut self) {
        self.stop_ticker.store(true, Ordering::Relaxed);
    }
}

/// A compiled agent component, and whether it came from the cache.
pub struct LoadedComponent {
    /// The component, ready to instantiate.
    pub component: Component,
    /// Whether it was loaded from the compile cache rather than compiled now.
    pub from_cache: bool,
}

/// Turns wasmtime's verdict on a file that is not a component into one line.
fn describe_compile_error(error: anyhow::Error) -> anyhow::Error {
    let text = format!("{error:#}");
    if text.contains("magic header") || text.contains("unexpected end") {
        anyhow::anyhow!("not a WebAssembly component (bad header): build the agent for wasm32-wasip2")
    } else if text.contains("expected a component")
        || text.contains("unknown binary version")
        || text.contains("wasm module with a component parser")
    {
        anyhow::anyhow!(
            "a core WebAssembly module, not a component: build for wasm32-wasip2 or wrap it with `wasm-tools component new`"
        )
    } else {
        anyhow::anyhow!("not a valid WebAssembly component: {}", first_line(&text))
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or(text)
}

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
        let path = self.path_for(sha256);
        let mut artifact = tempfile::NamedTempFile::new_in(&self.dir)?;
        artifact.write_all(compiled)?;
        artifact.persist(&path).context("writing a compile-cache entry")?;
        let mut mac = tempfile::NamedTempFile::new_in(&self.dir)?;
        mac.write_all(blake3::keyed_hash(&self.key, compiled).as_bytes())?;
        mac.persist(path.with_extension("mac"))
            .context("writing a compile-cache entry")?;
        Ok(())
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

/// An agent file and its sha256. The file is mapped read-only rather than
/// read: hashing it is all a cache hit needs, and an 18 MB Python agent
/// need not be copied for that.
pub fn map_agent(path: &Path) -> Result<(memmap2::Mmap, String)> {
    let file =
        std::fs::File::open(path).map_err(|e| anyhow::anyhow!("{}: cannot read the agent: {e}", path.display()))?;
    // SAFETY: read-only; a file changed while an episode starts gives a
    // wrong hash or a failed compile, never unsafety in the host.
    let bytes = unsafe { memmap2::Mmap::map(&file) }
        .map_err(|e| anyhow::anyhow!("{}: cannot read the agent: {e}", path.display()))?;
    let sha256 = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes[..]));
    Ok((bytes, sha256))
}
