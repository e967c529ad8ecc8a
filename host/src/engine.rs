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

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn cache(&self) -> &CompileCache {
        &self.cache
    }

    /// Loads a component: from the compile cache when this host compiled it
    /// before, otherwise compiles it (off the async threads) and caches it.
    pub async fn load(&self, wasm: Arc<Vec<u8>>, sha256: &str) -> Result<LoadedComponent> {
        if let Some(component) = self.cache.get(&self.engine, sha256)? {
            return Ok(LoadedComponent {
                component,
                from_cache: true,
            });
        }
        let engine = self.engine.clone();
        let bytes = wasm.clone();
        let compiled = tokio::task::spawn_blocking(move || engine.precompile_component(&bytes))
            .await
            .context("compile task panicked")?
            .map_err(anyhow::Error::from)
            .map_err(describe_compile_error)?;
        self.cache.put(sha256, &compiled)?;
        // SAFETY: `compiled` was produced by this engine just now.
        let component = unsafe { Component::deserialize(&self.engine, &compiled) }.map_err(anyhow::Error::from)?;
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

pub struct LoadedComponent {
    pub component: Component,
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
/// compatibility hash. An artifact is only loaded when it carries a MAC made
/// with this cache's own key: wasmtime deserialisation trusts its input, so a
/// corrupted or foreign file must never reach it.
pub struct CompileCache {
    dir: PathBuf,
    key: [u8; 32],
    engine_hash: String,
}

const MAC_LEN: usize = 32;

impl CompileCache {
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
        let Ok(bytes) = std::fs::read(&path) else {
            return Ok(None);
        };
        if bytes.len() < MAC_LEN {
            tracing::warn!(path = %path.display(), "ignoring a truncated compile-cache entry");
            return Ok(None);
        }
        let (body, mac) = bytes.split_at(bytes.len() - MAC_LEN);
        let expected = blake3::keyed_hash(&self.key, body);
        if expected.as_bytes() != mac {
            tracing::warn!(path = %path.display(), "ignoring a compile-cache entry this host did not write");
            return Ok(None);
        }
        // SAFETY: the MAC proves this host's cache wrote these bytes from
        // `Engine::precompile_component`, for an engine with this compatibility hash.
        match unsafe { Component::deserialize(engine, body) } {
            Ok(component) => {
                // Recently used entries survive `mlrb cache prune`.
                let _ = std::fs::File::options()
                    .write(true)
                    .open(&path)
                    .and_then(|f| f.set_modified(std::time::SystemTime::now()));
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

    /// Stores a compiled artifact atomically (temp file + rename), so
    /// concurrent hosts never see half a file.
    pub fn put(&self, sha256: &str, compiled: &[u8]) -> Result<()> {
        let mac = blake3::keyed_hash(&self.key, compiled);
        let mut tmp = tempfile::NamedTempFile::new_in(&self.dir)?;
        use std::io::Write;
        tmp.write_all(compiled)?;
        tmp.write_all(mac.as_bytes())?;
        tmp.persist(self.path_for(sha256))
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
