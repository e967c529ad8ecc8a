//! The bench's progress display: an overall bar and one line per running
//! episode with its current step on a terminal; plain lines otherwise.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The bench's progress on stderr: bars on a terminal, plain lines otherwise.
pub struct Progress {
    bars: Option<(MultiProgress, ProgressBar)>,
    /// No output at all (`--quiet`, `--json`).
    quiet: bool,
    total: u64,
    done: AtomicU32,
}

/// The line of one running episode; it follows the episode's step counter.
pub struct EpisodeLine {
    bar: Option<ProgressBar>,
    ticker: Option<tokio::task::JoinHandle<()>>,
}

impl Progress {
    /// `already` episodes of `total` are done before this bench starts.
    pub fn new(total: u64, already: u64, quiet: bool) -> Self {
        let bars = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
            let overall = multi.add(ProgressBar::new(total));
            overall.set_style(
                ProgressStyle::with_template("{bar:30} {pos}/{len} episodes [{elapsed}, eta {eta}] {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            overall.set_position(already);
            overall.enable_steady_tick(Duration::from_millis(250));
            (multi, overall)
        });
        Self {
            bars,
            quiet,
            total,
            done: AtomicU32::new(already as u32),
        }
    }

    /// Shows a running episode; `steps` is its step counter.
    pub fn started(&self, id: &str, max_steps: u32, steps: Arc<AtomicU32>) -> EpisodeLine {
        let Some((multi, _)) = &self.bars else {
            if !self.quiet {
                eprintln!("started {id}");
            }
            return EpisodeLine {
                bar: None,
                ticker: None,
            };
        };
        let bar = multi.add(ProgressBar::new_spinner());
        bar.set_style(
            ProgressStyle::with_template("  {spinner} {msg}").unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        let line = bar.clone();
        let id = id.to_string();
        let ticker = tokio::spawn(async move {
            loop {
                line.set_message(format!("{id}: step {} of {max_steps}", steps.load(Ordering::Relaxed)));
                line.tick();
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
        EpisodeLine {
            bar: Some(bar),
            ticker: Some(ticker),
        }
    }

    /// An episode ended with `what` (its score, or why it has none).
    pub fn finished(&self, line: EpisodeLine, id: &str, what: &str) {
        self.clear(line);
        self.arrived(id, what);
    }

    /// An episode ended with `what`, here or elsewhere (a cluster worker).
    pub fn arrived(&self, id: &str, what: &str) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        match &self.bars {
            Some((_, overall)) => {
                overall.inc(1);
                overall.println(format!("{id}: {what}"));
            }
            None if self.quiet => {}
            None => eprintln!("[{done}/{}] {id}: {what}", self.total),
        }
    }

    /// Removes an episode's line without counting it as done (a retry).
    pub fn abandoned(&self, line: EpisodeLine, id: &str, what: &str) {
        self.clear(line);
        self.note(&format!("{id}: {what}"));
    }

    /// Stops an episode's line and takes it off the display.
    fn clear(&self, line: EpisodeLine) {
        if let Some(ticker) = line.ticker {
            ticker.abort();
        }
        if let (Some((multi, _)), Some(bar)) = (&self.bars, line.bar) {
            bar.finish_and_clear();
            multi.remove(&bar);
        }
    }

    /// A message that is not about one episode (a retry, an interruption).
    pub fn note(&self, text: &str) {
        match &self.bars {
            Some((_, overall)) => overall.println(text),
            None if self.quiet => {}
            None => eprintln!("{text}"),
        }
    }

    /// Clears the bars at the end of the bench.
    pub fn finish(&self) {
        if let Some((_, overall)) = &self.bars {
            overall.finish_and_clear();
        }
    }
}
