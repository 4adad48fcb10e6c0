//! The lease and the elector against real redis-server processes: the primitives and their
//! scripts, electors in this process and as `leasehold run` replicas, how a term begins and ends
//! (succession, handover on demand), keys leasehold did not write, a Redis that may evict the
//! lease, health-gated candidacy, what a replica kept out says of Redis, and the protocol that
//! releases share.

mod candidacy;
mod candidacy_flags;
mod elector;
mod eviction;
mod foreign_keys;
mod handover;
mod handover_faults;
mod kept_out;
mod primitives;
mod protocol;
mod redis_faults;
mod refused_publish;
mod step_down;
mod succession;
mod typed_errors;
