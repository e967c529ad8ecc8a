//! The engine's out-of-memory events for one container, counted as they
//! come.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bollard::Docker;
use bollard::query_parameters::EventsOptionsBuilder;
use futures_util::StreamExt;

/// Counts the daemon's OOM events for one container.
pub struct OomWatch {
    count: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl OomWatch {
    /// Starts counting the OOM events of container `id`.
    pub fn start(docker: &Docker, id: &str) -> Self {
        let filters = HashMap::from([
            ("container".to_string(), vec![id.to_string()]),
            ("event".to_string(), vec!["oom".to_string()]),
        ]);
        let mut events = docker.events(Some(EventsOptionsBuilder::default().filters(&filters).build()));
        let count = Arc::new(AtomicU64::new(0));
        let counter = count.clone();
        let task = tokio::spawn(async move {
            while let Some(Ok(_)) = events.next().await {
                counter.fetch_add(1, Ordering::SeqCst);
            }
        });
        Self { count, task }
    }

    /// The OOM events seen so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::SeqCst)
    }

    /// Whether an OOM kill came after the count was `before`, waiting up
    /// to `ms` milliseconds for its report.
    pub async fn seen_since(&self, before: u64, ms: u64) -> bool {
        for _ in 0..ms / 20 {
            if self.count() > before {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.count() > before
    }
}

impl Drop for OomWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}
