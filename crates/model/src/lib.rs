//! The model of leasehold's lease protocol lives in this crate's tests (`tests/model`), which
//! docs/MODEL.md explains. It is a crate of its own so that the workspace's test build
//! optimizes it (the root manifest's `[profile.dev.package.model]`): the checker's search is
//! the test run's largest use of the CPU, and unoptimized it takes several times as long.
