//! leasehold's core: one Redis lease and the election loop around it. The holder leads; it
//! steps down the moment it can no longer prove the lease is still its own, and says why. The
//! safety argument is in leasehold's docs/DESIGN.md.
//!
//! # The border
//!
//! **A feature that does not change when a term begins or ends lives outside this crate**, in
//! the product (`leasehold`); the core depends on no Kubernetes, HTTP, command-line or metrics
//! crate. The product reaches the loop through two seams of [`elector::Elector`]:
//!
//! - out: [`elector::TermHooks`], told in order of each term's moments and each status change;
//! - in: [`elector::Standing`], what the gates say, read before each try and after a win (given
//!   back when they said no meanwhile), and watched in a term.
//!
//! # Layout
//!
//! - [`clock`]: the boot-time clock every safety decision reads (it counts through suspend).
//! - [`lease`]: the Redis primitives and their Lua scripts: acquire, renew, release, observe,
//!   the release channel; the targets (one Redis, Sentinel, Cluster) and their TLS and ACL,
//!   with a new password asked of its source ([`lease::PasswordSource`]) when Redis refuses the
//!   one in use. No loops, no policy.
//! - [`elector`]: the state machine around them: follower waits, the leader's watchdog,
//!   step-down, the [`Leadership`](elector::Leadership) handle and its `check()`, the observable
//!   [`Status`](elector::Status). Its decisions are pure functions in `elector/decide/`
//!   (table-tested, and called by the model checker); the files around it do the I/O, each
//!   saying in its first line what it holds.
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
#[doc(hidden)] // The product takes its locks by the same rule; not the library's API.
pub mod locked;
