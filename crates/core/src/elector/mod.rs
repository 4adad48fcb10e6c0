//! The elector: turns the lease primitives into leadership.

mod board;
mod cycle;
/// The elector's decisions as pure functions, public only under `test-internals` so that the
/// model checker (`crates/model`) calls the very functions the elector calls; not API.
#[cfg(feature = "test-internals")]
#[doc(hidden)]
pub mod decide;
#[cfg(not(feature = "test-internals"))]
mod decide;
mod dropped;
mod ending;
mod follow;
mod hooks;
mod lead;
mod leadership;
mod notify;
mod sit_out;
mod standing;
mod status;
mod timing;

use std::fmt::Display;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::info;

pub use decide::{RateBound, backoff, pause_after_term, validity_at};
pub use hooks::{RenewalOutcome, TermHooks};
pub use leadership::{Leadership, NotLeader};
pub use standing::{Gate, Gates, Standing};
pub use status::{
    LeaderInfo, RedisHealth, Role, SitOut, SitOutReason, Status, StepDown, StepDownReason,
};
pub use timing::{FIXED_DRIFT, TIMING_RULE, Timing, TimingBound, TimingError, TimingField};

use crate::lease::RedisLease;
use crate::locked::locked;
use board::StatusBoard;
use decide::FollowerStrategy;
use hooks::Hooks;

/// The leader elector for one lease.
pub struct Elector {
    lease: Arc<RedisLease>,
    timing: Timing,
    status: StatusBoard,
    /// Who hears of each term and what the loop saw (`hooks.rs`), in order.
    hooks: Hooks,
    /// What keeps this replica out of the election (`standing.rs`): the gates added with
    /// `with_gate`.
    gates: Gates,
    stop_when_work_ends: bool,
    followers: FollowerStrategy,
    /// `Some(wait)`: one term only, and give up contending once `wait` has passed.
    one_term: Option<Duration>,
    /// The latest bound of Redis's clock rate, from a term's replies or a follower's tries: it
    /// bounds the next term's first validity until that term's own replies do.
    last_rate: std::sync::Mutex<Option<decide::RateBound>>,
}

impl Elector {
    /// An elector for `lease` with `timing`; refuses timings that break [`TIMING_RULE`].
    pub fn new(lease: RedisLease, timing: Timing) -> Result<Self, TimingError> {
        timing.validate()?;
        let status = Status {
            lease: lease.name().to_string(),
            identity: lease.owner().identity().to_owned(),
            owner: lease.owner().to_string(),
            role: Role::Starting,
            transitions: 0,
            last_step_down: None,
            redis: RedisHealth::default(),
            sitting_out: None,
        };
        Ok(Self {
            lease: Arc::new(lease),
            timing,
            status: StatusBoard::new(status),
            hooks: Hooks::default(),
            gates: Gates::default(),
            stop_when_work_ends: false,
            followers: FollowerStrategy::Notified,
            one_term: None,
            last_rate: std::sync::Mutex::new(None),
        })
    }

    /// Keeps this replica out of the election while `gate` says [`Standing::Out`]: a follower
    /// does not contend, and a leader steps down with the gate's reason
    /// ([`StepDownReason::Gate`]). When several keep it out, the first added names the reason.
    pub fn with_gate(mut self, gate: watch::Receiver<Standing>) -> Self {
        self.gates.add(gate);
        self
    }

    /// The gates added so far, to read what they say also after [`run`](Self::run) returned
    /// (why a one-shot lock never got to try).
    pub fn gates(&self) -> Gates {
        self.gates.clone()
    }

    /// Makes [`run`](Self::run) return after a term whose work returned, failed or panicked
    /// on its own (after stepping down and releasing), instead of contending again. For work
    /// whose end means the process is done (a singleton command that exited).
    pub fn stop_when_work_ends(mut self) -> Self {
        self.stop_when_work_ends = true;
        self
    }

    /// Makes [`run`](Self::run) a one-shot lock: contend until this replica leads or `wait`
    /// has passed (after at least one try, and one after a cooldown it found), lead at most
    /// one term, and return however that term ended. The status tells what happened
    /// (`transitions` 0: never led; else `last_step_down`).
    pub fn for_one_term(mut self, wait: Duration) -> Self {
        self.one_term = Some(wait);
        self
    }

    /// Not API: chooses how followers wait (the default is `FollowerStrategy::Notified`); the
    /// polling baseline exists only for the benchmark harness.
    #[cfg(feature = "test-internals")]
    #[doc(hidden)]
    pub fn with_follower_strategy(mut self, strategy: FollowerStrategy) -> Self {
        self.followers = strategy;
        self
    }

    /// Tells `hooks` of each term, of what the loop sees and of each change of the status
    /// (metrics, the guard file, a status board), after the hooks added before.
    pub fn with_hooks(mut self, hooks: Arc<dyn TermHooks>) -> Self {
        self.hooks.add(hooks);
        self
    }

    /// A live view of the elector's status.
    pub fn status(&self) -> watch::Receiver<Status> {
        self.status.subscribe()
    }

    /// The lease this elector contends for.
    pub fn lease(&self) -> &Arc<RedisLease> {
        &self.lease
    }

    /// The timing in force.
    pub fn timing(&self) -> Timing {
        self.timing
    }

    /// Contends for the lease until `shutdown` is cancelled. Each time this replica becomes
    /// leader, `work` is called with the [`Leadership`] of that term and runs on its own task;
    /// when it returns, fails or panics, the replica steps down and releases the lease, then
    /// contends again. On shutdown a leader steps down with reason `shutdown` and releases the
    /// lease, so that a follower takes over at once. Dropping this future in a term ends the
    /// term at once (`check()` refuses, `lost()` fires, the work is aborted) and leaves the lease
    /// to expire: cancel `shutdown` instead.
    pub async fn run<W, Fut, E>(self, shutdown: CancellationToken, mut work: W)
    where
        W: FnMut(Leadership) -> Fut,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Display + Send + 'static,
    {
        self.status.tell(self.hooks.clone());
        let stop_notify = shutdown.child_token();
        let (mut releases, notify_task) = match self.followers {
            FollowerStrategy::Notified => notify::spawn(
                self.lease.clone(),
                self.timing,
                self.status.clone(),
                self.gates(),
                stop_notify.clone(),
            ),
            FollowerStrategy::Polling => notify::none(stop_notify.clone()),
        };
        // Also when this future is dropped.
        let _stop_notify = stop_notify.clone().drop_guard();
        self.contend(&shutdown, &mut releases, &mut work).await;
        stop_notify.cancel();
        let _ = notify_task.await;
        self.hooks.each(|h| h.beat(None));
        self.status.modify(|s| s.role = Role::Stopped);
        info!(
            identity = %self.lease.owner().identity(),
            lease = %self.lease.name(),
            "elector stopped"
        );
    }

    /// Keeps the latest bound of Redis's clock rate (a term's, or a follower's tries') that says
    /// something, for the validity until a window bounds the rate again: a term's first, and
    /// those after a step started the window anew. A wide bound would say nothing, and forget
    /// a Redis known fast.
    pub(super) fn keep_rate(&self, bound: Option<decide::RateBound>) {
        if let Some(bound) = bound.filter(|b| b.says_something(self.timing.drift_factor)) {
            *locked(&self.last_rate) = Some(bound);
        }
    }

    fn kept_rate(&self) -> Option<decide::RateBound> {
        *locked(&self.last_rate)
    }
}
