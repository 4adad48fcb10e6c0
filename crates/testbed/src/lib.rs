//! Real servers and processes for integration tests, on loopback ports of this machine: each
//! starts on a free port in its own temporary directory, is killed and reaped when dropped, and
//! prints its log when the test that owns it panics. It knows nothing of the code under test.
//!
//! # Layout
//!
//! - [`port`]: the one way to find a free loopback port.
//! - [`cargo`]: cargo run from inside a test, without the variables of the package under test.
//! - [`wait`]: waiting for a condition with a bound, never a bare sleep.
//! - [`child`]: a guarded child process (parent-death signal, kill and reap on drop) and the
//!   [`Lines`] collector of its output.
//! - [`process_tree`]: watching processes from the outside through `/proc`, and a pid file
//!   whose processes die with it.
//! - [`redis_server`]: one `redis-server`, built with [`RedisServer::builder`]; [`sentinel`]
//!   and [`cluster`] build on it. [`engine`]: which server binary it runs (Redis 7.0, 6.2,
//!   Valkey 9.1).
//! - [`accept`]: a test server's accept loop that ends when the server is told to stop.
//! - [`proxy`]: a TCP fault proxy (pass, delay, blackhole, drop; per connection too).
//! - [`stalling_dir`]: a directory whose filesystem stops answering when told (a FUSE mount);
//!   [`full_dir`]: one whose filesystem can be filled (a small tmpfs).
//! - [`pki`]: a throwaway CA with server and client certificates.
//! - [`http`]: a minimal HTTP/1.x GET for loopback endpoints.
//! - [`svg`]: escaping the text of a hand-written SVG report.
//! - [`hosts`]: host names of the test's own (one name for several loopback addresses), seen
//!   only by the processes the test starts with them.
//! - [`postgres`], [`prometheus`]: a PostgreSQL cluster and a Prometheus server.
//! - [`dockerfile`]: a Dockerfile's build stage replayed in a directory, without a container,
//!   and its final stage rewritten to build from files; [`image`]: the repository's image built
//!   with them by buildah, and podman to run it.
//! - [`fake_api`]: an in-process fake Kubernetes API server that kube's client runs against.
//!
//! Panics are the failure mode of the fixtures that tests use (`start`, `cmd`); the calls that
//! a harness outside a test needs return errors instead (`try_start`, [`child::Guarded::spawn`]).

pub mod accept;
pub mod cargo;
pub mod child;
pub mod cluster;
pub mod dockerfile;
pub mod engine;
pub mod fake_api;
pub mod full_dir;
pub mod hosts;
pub mod http;
pub mod image;
pub mod pki;
pub mod port;
pub mod postgres;
pub mod process_tree;
pub mod prometheus;
pub mod proxy;
pub mod redis_server;
pub mod sentinel;
pub mod stalling_dir;
pub mod svg;
pub mod wait;

pub use child::{Guarded, Lines};
pub use port::{free_addr, free_port};
pub use redis_server::{Persistence, RedisServer};
