//! Leadership as readers outside leasehold see it: `/metrics` in both exposition formats, a real
//! Prometheus scraping real replicas with the chart's rules, `/healthz` against a wedged elector,
//! and `/leader` as server-sent events.

mod exposition;
mod liveness;
mod prometheus;
mod sse;
