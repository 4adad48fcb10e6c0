//! The eviction gate's reads: when to read the policy again, and what a read changes (the gate,
//! what the replica shows, the log).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use super::{EVICTION, Eviction, EvictionMode, EvictionRefusal, refusal};
use crate::board::{Board, GateHooks};
use crate::elector::{Gates, Role, Standing, Status, Timing};
use crate::eviction_policy::EvictionPolicy;
use crate::lease::{LeaseError, RedisLease};

/// The eviction gate of one replica, not started.
pub struct EvictionWatch {
    lease: Arc<RedisLease>,
    timing: Timing,
    mode: EvictionMode,
    gate: watch::Sender<Standing>,
}

impl EvictionWatch {
    /// The gate for `lease`, and the standing it gives
    /// ([`Elector::with_gate`](crate::elector::Elector::with_gate)): without the data-loss
    /// cooldown an `allkeys-*` Redis is refused (docs/DESIGN.md, "Eviction"), and with
    /// `--redis-eviction refuse` one that may evict, so then until the policy is read the
    /// replica stays out, and not one try goes out before Redis has said which policy it has.
    pub fn new(
        lease: Arc<RedisLease>,
        timing: Timing,
        mode: EvictionMode,
    ) -> (Self, watch::Receiver<Standing>) {
        let before_read = if lease.cools_down_on_data_loss() && mode == EvictionMode::Warn {
            Standing::Stands
        } else {
            Standing::Out {
                gate: EVICTION,
                detail: Some("the eviction policy is not read yet".to_owned()),
            }
        };
        let (gate, standing) = watch::channel(before_read);
        let watch = Self {
            lease,
            timing,
            mode,
            gate,
        };
        (watch, standing)
    }

    /// Starts reading: Redis's answers to the elector show on `seen` (its status), whether the
    /// replica is kept out on `gates` (the elector's, this one among them); what is read goes to
    /// `board` and `told`. It stops when `stop` is cancelled or the elector is gone.
    pub fn spawn(
        self,
        mut seen: watch::Receiver<Status>,
        mut gates: Gates,
        board: Board,
        told: Arc<dyn GateHooks>,
        stop: CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let Self {
            lease,
            timing,
            mode,
            gate,
        } = self;
        tokio::spawn(async move {
            let mut said_unreadable = false;
            let mut first = true;
            // A failed read says nothing about the policy: the last one read stands.
            let mut last_read: Option<EvictionPolicy> = None;
            loop {
                // Only ask a Redis that answers the elector (no extra dials or failed logins while
                // it is down or refuses us), unless a gate keeps the replica out: the elector then
                // sends nothing, and may never have reached Redis. The first read goes out at
                // once: without the data-loss cooldown the follower waits for it before its first
                // try. The elector gone (its status closed) ends the watch with it. Standing, the
                // replica shows the elector's word of Redis (here too: the gates may have let it
                // stand just as the wait below ended).
                if !first {
                    if gates.standing().stands() {
                        board.modify_if(|s| s.hear(None));
                    }
                    tokio::select! {
                        biased;
                        _ = stop.cancelled() => return,
                        answers = seen.wait_for(|s| s.redis.reachable && s.redis.last_error.is_none()) => if answers.is_err() { return },
                        _ = gates.wait_until(|s| !s.stands()) => {}
                    }
                }
                let read = tokio::select! {
                    biased;
                    _ = stop.cancelled() => return,
                    r = EvictionPolicy::read(&lease, timing.call_timeout()) => r,
                };
                // Kept out, the elector sends nothing: this read is the one that says Redis
                // does not answer.
                let out = !gates.standing().stands();
                if let Err(err) = &read
                    && tells_unreadable(said_unreadable, err, out)
                {
                    warn!(
                        identity = %lease.owner().identity(),
                        lease = %lease.name(),
                        error = %err,
                        "cannot read the eviction policy (INFO memory); going by the last one read, if any"
                    );
                    said_unreadable = true;
                }
                let answer = match &read {
                    Ok(_) => (true, None),
                    Err(err) => (err.is_answer(), Some(err.to_string())),
                };
                if first && !answer.0 {
                    // No answer yet (Redis down, or not up yet): ask again a retry period later,
                    // with the policy still unknown, or as soon as the gates let the replica
                    // stand (then the elector's word of Redis is shown, not this read's).
                    board.modify_if(|s| s.hear(out.then_some(answer)));
                    tokio::select! {
                        biased;
                        _ = stop.cancelled() => return,
                        _ = tokio::time::sleep(timing.retry_period) => continue,
                        _ = gates.wait_until(|s| s.stands()), if out => continue,
                    }
                }
                first = false;
                let eviction = match read {
                    Ok(policy) => {
                        told.eviction_policy(&policy.policy, policy.may_evict());
                        said_unreadable = false;
                        last_read = Some(policy.clone());
                        Eviction::Read(policy)
                    }
                    Err(err) => match &last_read {
                        Some(policy) => Eviction::Read(policy.clone()),
                        None => Eviction::Unreadable {
                            reason: err.to_string(),
                        },
                    },
                };
                record(&lease, mode, &board, &gate, eviction);
                let heard = (!gates.standing().stands()).then_some(answer);
                board.modify_if(|s| s.hear(heard));
                let read_at = Instant::now();
                let led_at_read = leads(&seen.borrow_and_update());
                // Until the next read is due: the wait depends on the role, which may change.
                loop {
                    let out = !gates.standing().stands();
                    if !out {
                        board.modify_if(|s| s.hear(None));
                    }
                    let leading = leads(&seen.borrow_and_update());
                    if leading && !led_at_read {
                        break;
                    }
                    let due = read_at + reread_after(&timing, leading, out);
                    tokio::select! {
                        biased;
                        _ = stop.cancelled() => return,
                        _ = tokio::time::sleep_until(due) => break,
                        changed = seen.changed() => if changed.is_err() { return },
                        _ = gates.wait_until(|s| s.stands() == out) => {}
                    }
                }
            }
        })
    }
}

fn leads(status: &Status) -> bool {
    matches!(status.role, Role::Leader { .. })
}

/// How many lease durations a leader waits between two reads of the policy.
const LEADER_READS_EVERY: u32 = 4;

/// How many lease durations a follower waits between two reads of the policy.
const FOLLOWER_READS_EVERY: u32 = 64;

/// How long after a read the policy is read again: every lease duration while a gate keeps this
/// replica out of the election (to notice a fix), else as the two constants above say.
fn reread_after(timing: &Timing, leading: bool, out: bool) -> Duration {
    let every = match (out, leading) {
        (true, _) => 1,
        (false, true) => LEADER_READS_EVERY,
        (false, false) => FOLLOWER_READS_EVERY,
    };
    timing.lease_duration.saturating_mul(every)
}

/// Puts what was read into the gate and what the replica shows (the gate first: the loop reads
/// it), saying so when it changed.
fn record(
    lease: &RedisLease,
    mode: EvictionMode,
    board: &Board,
    gate: &watch::Sender<Standing>,
    eviction: Eviction,
) {
    let refused = refusal(mode, &eviction, lease.cools_down_on_data_loss());
    gate.send_replace(match refused {
        Some(_) => Standing::Out {
            gate: EVICTION,
            detail: Some(eviction.to_string()),
        },
        None => Standing::Stands,
    });
    let mut changed_to: Option<Eviction> = None;
    let mut newly_unsafe = false;
    board.modify_if(|s| {
        let changed = s.eviction != eviction || s.eviction_refusal != refused;
        if eviction_news(&s.eviction, &eviction) {
            changed_to = Some(eviction.clone());
        }
        newly_unsafe = refused == Some(EvictionRefusal::Unsafe)
            && s.eviction_refusal != Some(EvictionRefusal::Unsafe);
        s.eviction = eviction.clone();
        s.eviction_refusal = refused;
        changed
    });
    if newly_unsafe && let Eviction::Read(read) = &eviction {
        error!(
            identity = %lease.owner().identity(),
            lease = %lease.name(),
            policy = %read.policy,
            maxmemory = read.maxmemory,
            "redis evicts keys without a TTL (maxmemory-policy allkeys-*), which takes the lease's state record, and --no-data-loss-cooldown turns off the cooldown that covers that: two replicas could lead; refusing"
        );
    }
    let Some(Eviction::Read(read)) = changed_to else {
        return;
    };
    let identity = lease.owner().identity();
    let name = lease.name();
    let EvictionPolicy { maxmemory, policy } = &read;
    if read.may_evict() {
        warn!(
            %identity,
            lease = %name,
            policy = %policy,
            maxmemory,
            refuse = refused.is_some(),
            "redis may evict the lease under memory pressure (maxmemory with an evicting policy); give leases a redis with maxmemory-policy noeviction"
        );
    } else {
        info!(%identity, lease = %name, policy = %policy, maxmemory, "redis does not evict keys");
    }
}

/// Whether a read of the eviction policy is worth saying in the log: the first successful read,
/// and every change between "may evict" and "does not".
fn eviction_news(before: &Eviction, now: &Eviction) -> bool {
    before.may_evict() != now.may_evict()
        || matches!((before, now), (Eviction::NotRead, Eviction::Read(_)))
}

/// Whether a failure to read the eviction policy is said (once, until a read succeeds): not
/// when it was said already, and not for a timeout or a broken link, which the elector's own
/// calls report, unless a gate keeps the replica `out` (the elector then calls nothing).
fn tells_unreadable(already_told: bool, err: &LeaseError, out: bool) -> bool {
    !already_told
        && (out
            || !matches!(
                err,
                LeaseError::Timeout { .. } | LeaseError::Connection { .. }
            ))
}

#[cfg(test)]
mod tests {
    use super::super::tests::read;
    use super::*;

    #[test]
    fn reread_table() {
        let t = Timing::default(); // 15 s lease duration
        let s = Duration::from_secs;
        // (leading, refused) -> the wait after a read
        let cases = [
            (
                (false, false),
                s(960),
                "a follower: rarely (64 lease durations)",
            ),
            ((true, false), s(60), "the leader: every 4 lease durations"),
            ((false, true), s(15), "kept out: every lease duration"),
            (
                (true, true),
                s(15),
                "a leader about to step down for it: the same",
            ),
        ];
        for ((leading, refused), want, why) in cases {
            assert_eq!(reread_after(&t, leading, refused), want, "{why}");
        }
    }

    #[test]
    fn an_eviction_policy_is_said_when_first_read_and_when_it_turns() {
        let evicting = read(1 << 30, "allkeys-lru");
        let safe = read(0, "noeviction");
        let unreadable = Eviction::Unreadable {
            reason: "NOPERM".into(),
        };
        // (before, now) -> news
        let cases = [
            (
                Eviction::NotRead,
                safe.clone(),
                true,
                "the first read is said",
            ),
            (
                Eviction::NotRead,
                evicting.clone(),
                true,
                "an evicting first read too",
            ),
            (safe.clone(), safe.clone(), false, "the same again is not"),
            (
                evicting.clone(),
                evicting.clone(),
                false,
                "nor an evicting one again",
            ),
            (
                safe.clone(),
                evicting.clone(),
                true,
                "turning to evict is said",
            ),
            (evicting.clone(), safe.clone(), true, "and turning back"),
            (
                evicting.clone(),
                read(1 << 20, "volatile-lru"),
                false,
                "another evicting policy is no news",
            ),
            (
                Eviction::NotRead,
                unreadable.clone(),
                false,
                "unreadable is said apart",
            ),
            (
                unreadable.clone(),
                safe.clone(),
                false,
                "a read after an unreadable one that does not evict",
            ),
            (
                unreadable,
                evicting,
                true,
                "one after an unreadable one that evicts",
            ),
        ];
        for (before, now, want, why) in cases {
            assert_eq!(eviction_news(&before, &now), want, "{why}");
        }
    }

    #[test]
    fn an_unreadable_eviction_policy_is_said_once_and_not_for_outages() {
        let timeout = LeaseError::Timeout {
            op: "info",
            after: Duration::from_millis(1_000),
        };
        let reset = LeaseError::Connection {
            op: "info",
            detail: "reset".into(),
        };
        let loading = LeaseError::Loading { op: "info" };
        // (told already, error, kept out) -> tell
        let cases = [
            (
                false,
                &loading,
                false,
                true,
                "a refusal or an odd answer is said",
            ),
            (true, &loading, false, false, "once"),
            (
                false,
                &timeout,
                false,
                false,
                "a timeout is the elector's own calls' to report",
            ),
            (false, &reset, false, false, "a broken link too"),
            (
                false,
                &reset,
                true,
                true,
                "unless a gate keeps the replica out: the elector calls nothing",
            ),
            (true, &timeout, true, false, "once, there too"),
        ];
        for (told, err, out, want, why) in cases {
            assert_eq!(tells_unreadable(told, err, out), want, "{why}");
        }
    }
}
