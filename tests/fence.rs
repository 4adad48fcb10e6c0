//! Fencing, tested for real: the `leasehold::fence` helpers against a real PostgreSQL cluster and
//! real redis-server processes (a newer token's write wins, an older one is refused and leaves
//! nothing behind, racing writers end in the highest's state), the HTTP and Kubernetes examples,
//! a frozen leader's command refused once the next leader wrote (two real `leasehold run`
//! replicas), and every code block of docs/FENCING.md checked against the files it quotes or
//! run as it stands.
//!
//! Built only with the features `fence-postgres` and `fence-redis` (`required-features` in
//! Cargo.toml): `cargo nextest run --all-features --test fence`.

mod support;

#[path = "fence/docs.rs"]
mod docs;
#[path = "fence/frozen.rs"]
mod frozen;
#[path = "fence/http_service.rs"]
mod http_service;
#[path = "fence/kubernetes_objects.rs"]
mod kubernetes_objects;
#[path = "fence/postgres_table.rs"]
mod postgres_table;
#[path = "fence/redis_script.rs"]
mod redis_script;

#[allow(dead_code)]
#[path = "../examples/fenced_http.rs"]
mod fenced_http;
#[allow(dead_code)]
#[path = "../examples/fenced_reconciler.rs"]
mod fenced_reconciler;
