//! A replica that cannot use a lease sits out (docs/DESIGN.md, "Gray failures").

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::board::set;
use super::decide::{self, Seen};
use super::{Elector, SitOut, SitOutReason};
use crate::clock::BootInstant;
use crate::lease::{FencingToken, LeaseError, Released, Retry};

impl Elector {
    /// After an acquire whose outcome is unknown ([`decide::outcome_unknown`]): reads the lease
    /// until Redis answers within [`decide::link_fits`], giving back every term of ours that
    /// this replica never led ([`decide::unknown_term_of_ours`]), and sitting out meanwhile: one
    /// read per retry period (with jitter). `failures`: failed calls in a row so far (the
    /// acquire's), which the reads go on counting, so that an outage is said once; the leader
    /// seen is forgotten once nothing vouches for it (`vouched_until`). `false` at shutdown, or
    /// when a one-shot lock's wait is over.
    pub(super) async fn resolve_unknown_acquire(
        &self,
        shutdown: &CancellationToken,
        last_led: Option<FencingToken>,
        vouched_until: Option<BootInstant>,
        give_up_at: Option<BootInstant>,
        mut failures: u32,
    ) -> bool {
        let timing = self.timing;
        let clock = self.lease.clock().clone();
        loop {
            self.hooks.each(|h| h.beat(Some(timing.call_timeout())));
            let started = clock.now();
            // A read, not raced against shutdown: it is bounded by the call timeout.
            let seen = self.lease.observe(timing.call_timeout()).await;
            let took = clock.now().saturating_duration_since(started);
            let answered = match seen {
                Ok(observation) => {
                    self.redis_ok(&mut failures);
                    let owner = self.lease.owner().as_str();
                    if let Some(token) =
                        decide::unknown_term_of_ours(observation.holder.as_ref(), owner, last_led)
                    {
                        self.give_back_unknown_term(token).await;
                    }
                    true
                }
                Err(err) => {
                    self.redis_failed("observe", &err, &mut failures);
                    self.forget_leader_after(vouched_until);
                    if let LeaseError::Timeout { after, .. } = err {
                        self.sit_out(Some(slow_link(format!(
                            "redis did not answer within {} ms",
                            after.as_millis()
                        ))));
                    }
                    err.is_answer()
                }
            };
            if answered {
                if decide::link_fits(took, &timing) {
                    self.sit_out(None);
                    return !shutdown.is_cancelled();
                }
                self.sit_out(Some(slow_link(format!(
                    "a round trip to redis took {} ms; a lease needs one within {} ms (half the acquire bound), so that a call on a new connection fits the bound",
                    took.as_millis(),
                    (timing.acquire_timeout() / 2).as_millis()
                ))));
            }
            if shutdown.is_cancelled() {
                return false;
            }
            let probe = Seen::Failed {
                retry: Retry::Soon,
                failures: failures.max(1),
            };
            let wait = decide::follower_wait(probe, false, &timing, rand::random());
            let Some(wait) = decide::next_try(wait, clock.now(), give_up_at) else {
                return false;
            };
            self.hooks.each(|h| h.beat(Some(wait)));
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => return false,
                _ = clock.sleep_until(clock.now().saturating_add(wait)) => {}
            }
        }
    }

    /// Releases a term of ours that an unanswered acquire won, by its own term value; announced
    /// like any release, so the followers take over at once.
    async fn give_back_unknown_term(&self, token: FencingToken) {
        let identity = self.lease.owner().identity();
        let lease = self.lease.name();
        match self.lease.release(token, self.timing.call_timeout()).await {
            Ok(Released::Released) => info!(
                %identity,
                %lease,
                token = token.0,
                "gave back a term whose acquire went unanswered"
            ),
            Ok(Released::NotHeld) => {}
            Err(err) => warn!(
                %identity,
                %lease,
                token = token.0,
                error = %err,
                "could not give back a term whose acquire went unanswered; it expires on its own"
            ),
        }
    }

    /// Puts this replica out of the election on its own account (`Some`), or back in (`None`);
    /// says each change once.
    pub(super) fn sit_out(&self, sit_out: Option<SitOut>) {
        let identity = self.lease.owner().identity();
        let lease = self.lease.name();
        self.status.modify_if(|s| {
            let before = s.sitting_out.as_ref().map(|out| out.reason);
            match (&before, &sit_out) {
                (before, Some(out)) if *before != Some(out.reason) => warn!(
                    %identity,
                    %lease,
                    reason = out.reason.as_label(),
                    detail = %out.detail,
                    "sitting out of the election"
                ),
                (Some(before), None) => info!(
                    %identity,
                    %lease,
                    reason = before.as_label(),
                    "back in the election"
                ),
                _ => {}
            }
            set(&mut s.sitting_out, sit_out.clone())
        });
    }
}

fn slow_link(detail: String) -> SitOut {
    SitOut {
        reason: SitOutReason::SlowLink,
        detail,
    }
}
