//! Fencing, tested for real: the `leasehold::fence` helpers against a real PostgreSQL cluster and
//! real redis-server processes (a newer token's write wins, an older one is refused and leaves
//! nothing behind, racing writers end in the highest's state), the HTTP and Kubernetes examples,
//! a frozen leader's command refused once the next leader wrote (two real `leasehold run`
//! replicas), and every code block of docs/FENCING.md checked against the files it quotes or
//! run as it stands.
//!
//! The examples run as the programs they are (`cargo run --example fenced_http`), built beside
//! the tests.

mod docs;
mod frozen;
mod http_service;
mod kubernetes_objects;
mod postgres_table;
mod redis_script;
