//! Probe agents for mlrb's benchmarks (see host/benches/core.rs).
