//! leasehold's core: one Redis lease and the election loop around it.
//!
//! The holder of the lease is the leader: it runs the leader's work and renews the lease with a
//! watchdog. The moment it can no longer prove that it still holds the lease, it steps down:
//! its work is cancelled, its `check()` refuses, and it says why. The safety argument (one
//! atomic acquire, compare-and-set renew and release, a validity deadline on the boot-time
//! clock, a synchronous check before each side effect, fencing tokens that never go backwards,
//! a cooldown after Redis lost its data) is in leasehold's docs/DESIGN.md.
//!
//! # The border
//!
//! **A feature that does not change when a term begins or ends lives outside this crate.** The
//! core depends on no Kubernetes, HTTP, command-line or metrics crate, and nothing here imports
//! from the product crate (`leasehold`), which holds the binary, its probes and metrics, the
//! guard file, the singleton command's supervisor, the Kubernetes side and the operator tools.
//! What the product adds to the loop goes through two seams of [`elector::Elector`]:
//!
//! - out: [`elector::TermHooks`], told in order of each term's moments (`began`, `extended`,
//!   `ending` first in the step-down, `ended`), of what the loop sees and of every change of
//!   the status; the guard file, the metrics and the product's status board (with its event
//!   history) are hooks;
//! - in: [`elector::Standing`], what gates say (stand, or stay out with a reason), read in one
//!   place by the follower before each try and watched by the leader for the whole term; a
//!   term a gate ends steps down with the gate's own reason. Any number of gates come in with
//!   `Elector::with_gate`; the product's (the eviction policy, the candidate check, the clock
//!   rate) are all outside.
//!
//! # Layout
//!
//! - [`clock`]: the boot-time clock every safety decision reads (it counts through suspend).
//! - [`lease`]: the Redis primitives and their Lua scripts: acquire, renew, release, observe,
//!   the release channel; the targets (one Redis, Sentinel, Cluster) and their TLS and ACL,
//!   with a password file read again when Redis refuses the password. No loops, no policy.
//! - [`elector`]: the state machine around them: follower waits, the leader's watchdog,
//!   step-down, the [`Leadership`](elector::Leadership) handle and its `check()`, the observable
//!   [`Status`](elector::Status). Its decisions are pure functions in `elector/decide/`
//!   (table-tested, and called by the model checker); the files around it do the I/O:
//!   `follow.rs` (the follower loop), `sit_out.rs` (an acquire nobody answered), `lead.rs` (one
//!   term: the watchdog and step-down), `ending.rs` (the reason and words a term ends with),
//!   `cycle.rs` (between terms), `notify.rs` (the release channel), `board.rs` (the status's
//!   one way in), `hooks.rs` (the term hooks, out), `standing.rs` (the gates, in).
//!
//! # The public API
//!
//! [`lease::RedisLease`] with its names ([`lease::LeaseName`], [`lease::OwnerId`]), options and
//! outcomes; [`elector::Elector`] with [`elector::Timing`], [`elector::Leadership`],
//! [`elector::Status`], [`elector::TermHooks`], [`elector::Standing`] and [`elector::Gates`];
//! [`clock::BootInstant`] and its clock.
//!
//! # Example
//!
//! ```no_run
//! use leasehold_core::elector::{Elector, Leadership, Role, Timing};
//! use leasehold_core::lease::{LeaseName, LeaseOptions, OwnerId, RedisLease};
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let name = LeaseName::for_deployment("default", "billing")?;
//! let owner = OwnerId::generate("billing-7d4f-x2x9")?;
//! let lease = RedisLease::new("redis://redis:6379", name, owner, LeaseOptions::default())?;
//! let elector = Elector::new(lease, Timing::default())?;
//! // A fresh or emptied Redis: nobody leads for one lease duration (a term it lost may still
//! // be valid). Say so while it lasts.
//! let mut status = elector.status();
//! tokio::spawn(async move {
//!     while status.changed().await.is_ok() {
//!         if let Role::Follower { cooldown: Some(left), .. } = &status.borrow().role {
//!             println!("redis is new or lost its data: nobody leads for {left:?} more");
//!         }
//!     }
//! });
//! let shutdown = CancellationToken::new();
//! elector
//!     .run(shutdown, |leadership: Leadership| async move {
//!         loop {
//!             // Refused after a pause that outlasted the lease, even before the watchdog runs.
//!             let token = leadership.check()?;
//!             println!("acting with fencing token {token}");
//!             tokio::select! {
//!                 _ = leadership.lost() => return Ok::<_, leasehold_core::elector::NotLeader>(()),
//!                 _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
//!             }
//!         }
//!     })
//!     .await;
//! # Ok(())
//! # }
//! ```

pub mod clock;
pub mod elector;
pub mod lease;
