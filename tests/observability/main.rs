//! Leadership as readers outside leasehold see it: `/metrics` in both exposition formats, a real
//! Prometheus scraping real replicas with the chart's rules, `/healthz` against a wedged elector,
//! `/leader` as server-sent events, and the HTTP port under a flood of connections, within the
//! open-files limit.

mod exposition;
mod flood;
mod liveness;
mod open_files;
mod prometheus;
mod sse;
mod sse_replay;
