//! The wasmtime engine (one per process), its epoch ticker, the on-disk
//! cache of compiled components (`cache`) and the compile gate (`gate`,
//! `child`): the `mlrb` binary compiles every component in a bounded child
//! process, so a component that takes too long or too much memory to
//! compile is refused without slowing or endangering the host.

pub mod cache;
pub mod child;
pub mod gate;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use wasmtime::component::Component;
use wasmtime::{Config, Engine};

pub use cache::CompileCache;

/// How often the epoch advances. Each tick lets a running agent yield to the
/// async runtime, so agents share threads fairly and deadlines are noticed.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// The engine configuration, one for the host and its compile children
/// (an artifact runs only on an engine configured as the one that made it).
pub fn config() -> Config {
    let mut config = Config::new();
    config.epoch_interruption(true);
    config.wasm_component_model(true);
    // Guests must not be able to exhaust the host's own stack.
    config.max_wasm_stack(2 << 20);
    config
}

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
        let engine = Engine::new(&config()).map_err(anyhow::Error::from)?;
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
    /// before, otherwise compiles it and caches it. The `mlrb` binary
    /// compiles through the gate (a bounded child process; the artifact is
    /// cached only when it succeeds); a program that embeds the library
    /// without enabling the gate compiles on a blocking thread.
    pub async fn load(&self, wasm: &[u8], sha256: &str) -> Result<LoadedComponent> {
        if let Some(component) = self.cache.get(&self.engine, sha256)? {
            return Ok(LoadedComponent {
                component,
                from_cache: true,
            });
        }
        if let Some(gate) = gate::enabled() {
            let staged = self.cache.stage()?;
            gate.compile(wasm, staged.path()).await?;
            self.cache.keep(sha256, staged)?;
            let component = self
                .cache
                .get(&self.engine, sha256)?
                .context("the compile cache lost an artifact just written")?;
            return Ok(LoadedComponent {
                component,
                from_cache: false,
            });
        }
        self.compile_here(wasm, sha256).await
    }

    /// Compiles in this process, off the async threads.
    async fn compile_here(&self, wasm: &[u8], sha256: &str) -> Result<LoadedComponent> {
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
pub(crate) fn describe_compile_error(error: anyhow::Error) -> anyhow::Error {
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
