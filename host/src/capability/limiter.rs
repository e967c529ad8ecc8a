//! A cap on the agent's total linear memory.
//!
//! `StoreLimits::memory_size` applies per memory, and a component (a Python
//! agent especially) has several; this limiter sums them.

use serde::Serialize;

/// A memory growth the limiter refused.
#[derive(Debug, Clone, Serialize)]
pub struct MemoryDenial {
    /// Linear memory in use across all memories, in bytes.
    pub in_use: usize,
    /// How much more the refused growth asked for, in bytes.
    pub requested: usize,
    /// The cap on the total, in bytes.
    pub limit: usize,
}

/// Caps the sum of an agent's linear memories and tracks its peak.
pub struct MemoryLimiter {
    limit: usize,
    in_use: usize,
    peak: usize,
    denied: Option<MemoryDenial>,
}

impl MemoryLimiter {
    /// A limiter capping total linear memory at `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            in_use: 0,
            peak: 0,
            denied: None,
        }
    }

    /// The first growth refused, if any: the cause when the agent then traps.
    pub fn denied(&self) -> Option<&MemoryDenial> {
        self.denied.as_ref()
    }

    /// The most linear memory in use at once so far, in bytes.
    pub fn peak(&self) -> usize {
        self.peak
    }
}

const MAX_TABLE_ELEMENTS: usize = 1 << 20;

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        let total = self.in_use - current.min(self.in_use) + desired;
        if total > self.limit {
            self.denied.get_or_insert(MemoryDenial {
                in_use: self.in_use,
                requested: desired - current,
                limit: self.limit,
            });
            return Ok(false);
        }
        self.in_use = total;
        self.peak = self.peak.max(total);
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }

    fn instances(&self) -> usize {
        1_000
    }
    fn tables(&self) -> usize {
        1_000
    }
    fn memories(&self) -> usize {
        100
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::ResourceLimiter;

    #[test]
    fn caps_the_sum_of_all_memories() {
        let mut limiter = MemoryLimiter::new(100);
        assert!(limiter.memory_growing(0, 60, None).unwrap());
        assert!(limiter.memory_growing(0, 30, None).unwrap());
        // A second memory may not take the total past the cap.
        assert!(!limiter.memory_growing(30, 50, None).unwrap());
        assert!(limiter.denied().is_some());
        assert!(limiter.memory_growing(60, 70, None).unwrap());
        assert_eq!(limiter.peak(), 100);
    }
}
