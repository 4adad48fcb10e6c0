//! The follower's decisions: how long to wait before the next try (with the release channel,
//! without it, under the polling baseline, before a one-shot lock gives up), the observed-time
//! rule and which release lets go of it, what to give back after an acquire that raced
//! shutdown, and when the leader seen has changed.

use std::time::Duration;

use super::MAX_BACKOFF;
use crate::clock::BootInstant;
use crate::elector::notify::Wakeup;
use crate::elector::{FollowerStrategy, LeaderInfo, Role, Timing};
use crate::lease::{Acquired, FencingToken, Holder, LeaseError, Retry};

/// What a follower learnt from its last try, reduced to what decides its wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// Held, with this much TTL left (`None`: the key has no TTL).
    Held(Option<Duration>),
    /// Redis is cooling down after data loss for this long.
    CoolingDown(Duration),
    /// The call failed; `failures` in a row so far.
    Failed { retry: Retry, failures: u32 },
}

/// Redis expires a key when its clock is *past* the expiry millisecond; try just after.
const EXPIRY_SLACK: Duration = Duration::from_millis(1);

/// How long a follower sleeps before it tries again (a release notification cuts any sleep
/// short). `jitter` is drawn from [0, 1).
///
/// - Held with a TTL: until the TTL runs out, so a crashed leader is replaced within about a
///   millisecond of its expiry. With the release channel subscribed that is the only wake-up
///   besides a release (about one command per lease duration while a healthy leader renews);
///   without it, the retry period with jitter caps the wait, since a release would go unheard.
/// - Held without a TTL (not our key): the retry period with jitter.
/// - Cooling down: until the cooldown ends; nothing can succeed before.
/// - A passing failure: the retry period with jitter; a configuration fault: exponential
///   back-off from the retry period up to [`MAX_BACKOFF`].
pub fn follower_wait(seen: Seen, subscribed: bool, timing: &Timing, jitter: f64) -> Duration {
    let jitter = jitter.clamp(0.0, 1.0);
    // client-go's JitterUntil with factor 1.2: [retry period, 2.2 × retry period).
    let fallback = timing.retry_period + timing.retry_period.mul_f64(1.2 * jitter);
    match seen {
        Seen::Held(Some(ttl_left)) => {
            let at_expiry = ttl_left + EXPIRY_SLACK;
            if subscribed {
                at_expiry.min(timing.lease_duration)
            } else {
                at_expiry.min(fallback)
            }
        }
        Seen::Held(None) => fallback,
        Seen::CoolingDown(left) => left + EXPIRY_SLACK,
        Seen::Failed {
            retry: Retry::Soon, ..
        } => fallback,
        Seen::Failed {
            retry: Retry::BackOff,
            failures,
        } => {
            let doubled = timing
                .retry_period
                .saturating_mul(1u32 << failures.saturating_sub(1).min(16));
            doubled.min(MAX_BACKOFF).max(timing.retry_period) + timing.retry_period.mul_f64(jitter)
        }
    }
}

/// What the follower's strategy makes of what it saw: the polling baseline ignores the
/// holder's TTL (client-go's way: the retry period with jitter, nothing else).
pub fn seen_by(strategy: FollowerStrategy, seen: Seen) -> Seen {
    match (strategy, seen) {
        (FollowerStrategy::Polling, Seen::Held(_)) => Seen::Held(None),
        (_, seen) => seen,
    }
}

/// What a follower does after a try that did not win.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Sleep this long (a release may cut it short), then try again.
    Sleep(Duration),
    /// A one-shot lock whose wait is over: stop contending.
    GiveUp,
}

/// After a try at `now` with `wait` to the next one: a one-shot lock that gives up at
/// `give_up_at` stops once that instant has come (it has tried at least once by now), and
/// otherwise has one last try at it; without one, the wait stands.
pub fn next_try(wait: Duration, now: BootInstant, give_up_at: Option<BootInstant>) -> Next {
    match give_up_at {
        Some(at) if now >= at => Next::GiveUp,
        Some(at) => Next::Sleep(wait.min(now.until(at))),
        None => Next::Sleep(wait),
    }
}

/// client-go's observed-time rule, for what the server cannot see (a lease key that vanished
/// together with its record, or a forward step of the Redis host's clock): a holder seen with
/// `remaining` TTL at instant `seen_at` keeps its term until `seen_at + remaining` as far as
/// this follower is concerned. Whether, at `now`, the observation still stands (and goes with
/// the next acquire): not once it ran out, nor once the holder announced its release.
pub fn observation_stands(
    now: BootInstant,
    observed_until: BootInstant,
    release_announced: bool,
) -> bool {
    !release_announced && now < observed_until
}

/// Whether a wake-up announces the release of the very term observed (and so lets go of its
/// TTL): a release of another term says nothing of this one, and after a resubscription a
/// release may have been missed, which proves nothing either.
pub(crate) fn announces_release(wakeup: &Wakeup, observed: Option<&Holder>) -> bool {
    match (wakeup, observed) {
        (Wakeup::Released(term), Some(holder)) => *term == holder.term_value(),
        _ => false,
    }
}

/// What to give back after an acquire whose answer came after shutdown began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GiveBack {
    /// The term won: release it (compare-and-delete on its token).
    Term(FencingToken),
    /// No answer: the script may still have run, so release any term of ours (no later term
    /// of this process can follow, so that is safe).
    AnyTerm,
    /// Nothing was won.
    Nothing,
}

/// The release after an acquire that raced shutdown. The acquire is not raced against shutdown
/// (one that Redis already executed must not be abandoned, or the lease would sit unreleased
/// for a whole TTL); what it won, or may have won, is given back at once.
pub fn give_back(attempt: &Result<Acquired, LeaseError>) -> GiveBack {
    match attempt {
        Ok(Acquired::Leader(grant)) => GiveBack::Term(grant.token),
        Err(_) => GiveBack::AnyTerm,
        Ok(_) => GiveBack::Nothing,
    }
}

/// Whether a follower that saw `leader` (none: nobody, or not known) follows a new leader,
/// given its role so far: said once per leader, not at every look.
pub fn leader_changed(before: &Role, leader: Option<&LeaderInfo>) -> bool {
    match (before, leader) {
        (
            Role::Follower {
                leader: Some(old), ..
            },
            Some(new),
        ) => old.owner != new.owner,
        (_, Some(_)) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::super::rows::{at, ms};
    use super::*;
    use crate::lease::Grant;

    #[test]
    fn follower_wait_table() {
        let t = Timing::default(); // 15 s / 10 s / 2 s
        let soon = Seen::Failed {
            retry: Retry::Soon,
            failures: 1,
        };
        let back_off = |failures| Seen::Failed {
            retry: Retry::BackOff,
            failures,
        };
        // (seen, subscribed, jitter) -> wait
        let cases = [
            (
                Seen::Held(Some(ms(14_000))),
                true,
                0.5,
                ms(14_001),
                "a healthy leader renews: sleep to its expiry, one command per lease duration",
            ),
            (
                Seen::Held(Some(ms(300))),
                true,
                0.0,
                ms(301),
                "a crashed leader: wake a millisecond after its expiry",
            ),
            (
                Seen::Held(Some(ms(0))),
                true,
                0.0,
                ms(1),
                "an expiry due now: just after it",
            ),
            (
                Seen::Held(Some(ms(60_000))),
                true,
                0.0,
                ms(15_000),
                "a holder with a longer TTL (another configuration) is capped at ours",
            ),
            (
                Seen::Held(Some(ms(14_000))),
                false,
                0.0,
                ms(2_000),
                "without the release channel the retry period caps the wait",
            ),
            (
                Seen::Held(Some(ms(14_000))),
                false,
                0.5,
                ms(3_200),
                "with client-go's jitter of 1.2",
            ),
            (
                Seen::Held(Some(ms(500))),
                false,
                0.5,
                ms(501),
                "an expiry before the cap still wakes at the expiry",
            ),
            (
                Seen::Held(None),
                true,
                0.0,
                ms(2_000),
                "no TTL on the key: poll at the retry period",
            ),
            (
                Seen::CoolingDown(ms(7_000)),
                false,
                0.9,
                ms(7_001),
                "cooling down: until it ends, jitter or not",
            ),
            (
                soon,
                true,
                0.0,
                ms(2_000),
                "a passing failure: the retry period",
            ),
            (
                back_off(1),
                true,
                0.0,
                ms(2_000),
                "a refusal backs off from the retry period",
            ),
            (back_off(2), true, 0.0, ms(4_000), "and doubles"),
            (back_off(4), true, 0.0, ms(16_000), "and doubles again"),
            (back_off(5), true, 0.0, ms(30_000), "up to 30 s"),
            (
                back_off(40),
                true,
                0.5,
                ms(31_000),
                "however many, plus jitter",
            ),
        ];
        for (seen, subscribed, jitter, want, why) in cases {
            assert_eq!(follower_wait(seen, subscribed, &t, jitter), want, "{why}");
        }
    }

    #[test]
    fn jitter_stays_within_client_go_bounds() {
        let timing = Timing::default();
        for j in [-1.0, 0.0, 0.25, 0.999, 7.0] {
            let wait = follower_wait(Seen::Held(None), true, &timing, j);
            assert!(wait >= ms(2_000) && wait <= ms(4_400), "{j}: {wait:?}");
        }
    }

    #[test]
    fn the_polling_baseline_ignores_the_holders_ttl() {
        use FollowerStrategy::*;
        let failed = Seen::Failed {
            retry: Retry::Soon,
            failures: 2,
        };
        // (strategy, seen) -> what the wait is decided on
        let cases = [
            (
                Notified,
                Seen::Held(Some(ms(300))),
                Seen::Held(Some(ms(300))),
                "leasehold wakes at the TTL",
            ),
            (
                Polling,
                Seen::Held(Some(ms(300))),
                Seen::Held(None),
                "polling does not",
            ),
            (
                Polling,
                Seen::Held(None),
                Seen::Held(None),
                "a key without TTL is the same to both",
            ),
            (
                Polling,
                Seen::CoolingDown(ms(7_000)),
                Seen::CoolingDown(ms(7_000)),
                "a cooldown is waited out by both",
            ),
            (Polling, failed, failed, "failures back off alike"),
        ];
        for (strategy, seen, want, why) in cases {
            assert_eq!(seen_by(strategy, seen), want, "{why}");
        }
    }

    #[test]
    fn a_one_shot_lock_gives_up_after_its_wait_with_one_last_try() {
        // (wait, now, give up at) -> next
        let cases = [
            (
                ms(2_000),
                1_000,
                None,
                Next::Sleep(ms(2_000)),
                "an elector without a one-shot wait keeps its waits",
            ),
            (
                ms(2_000),
                1_000,
                Some(10_000),
                Next::Sleep(ms(2_000)),
                "a wait that ends before giving up stands",
            ),
            (
                ms(2_000),
                9_500,
                Some(10_000),
                Next::Sleep(ms(500)),
                "one last try at the end of the wait",
            ),
            (
                ms(2_000),
                10_000,
                Some(10_000),
                Next::GiveUp,
                "the wait is over",
            ),
            (
                ms(2_000),
                12_000,
                Some(10_000),
                Next::GiveUp,
                "a try that outlasted the wait gives up too",
            ),
        ];
        for (wait, now, give_up_at, want, why) in cases {
            assert_eq!(next_try(wait, at(now), give_up_at.map(at)), want, "{why}");
        }
    }

    #[test]
    fn observed_time_table() {
        // (now, observed until, release announced) -> the observation stands
        let cases = [
            (1_000, 3_000, false, true, "well inside the observed TTL"),
            (
                2_999,
                3_000,
                false,
                true,
                "a millisecond before it runs out",
            ),
            (3_000, 3_000, false, false, "run out"),
            (9_000, 3_000, false, false, "long run out"),
            (
                1_000,
                3_000,
                true,
                false,
                "the holder said it let go: no reason to keep its TTL",
            ),
        ];
        for (now, until, announced, want, why) in cases {
            assert_eq!(
                observation_stands(at(now), at(until), announced),
                want,
                "{why}"
            );
        }
    }

    fn holder(owner: &str, token: Option<u64>) -> Holder {
        Holder {
            owner: owner.to_owned(),
            remaining: Some(ms(3_000)),
            token: token.map(FencingToken),
            vanished: false,
        }
    }

    #[test]
    fn only_the_release_of_the_observed_term_lets_go_of_it() {
        let released = |term: &str| Wakeup::Released(term.to_owned());
        let a7 = holder("a-1", Some(7));
        // (wake-up, holder observed) -> lets go
        let cases = [
            (
                released("a-1#7"),
                Some(&a7),
                true,
                "the observed term itself",
            ),
            (
                released("a-1#6"),
                Some(&a7),
                false,
                "an earlier term of the same owner",
            ),
            (released("b-2#7"), Some(&a7), false, "another owner"),
            (
                released("a-1#7"),
                None,
                false,
                "nothing observed, nothing to let go",
            ),
            (
                Wakeup::Resubscribed,
                Some(&a7),
                false,
                "a resubscription may have missed a release: proves nothing",
            ),
        ];
        for (wakeup, observed, want, why) in cases {
            assert_eq!(announces_release(&wakeup, observed), want, "{why}");
        }
        let foreign = holder("someone", None);
        assert!(
            announces_release(&released("someone"), Some(&foreign)),
            "a value written without a token is its own term"
        );
    }

    #[test]
    fn an_acquire_that_raced_shutdown_gives_back_what_it_may_have_won() {
        let won = Ok(Acquired::Leader(Grant {
            token: FencingToken(9),
            sent_at: at(1_000),
            ttl: ms(15_000),
        }));
        let no_answer = Err(LeaseError::Timeout {
            op: "acquire",
            after: ms(1_000),
        });
        let refused = Err(LeaseError::Connection {
            op: "acquire",
            detail: "reset".into(),
        });
        let held = Ok(Acquired::HeldBy(holder("b-2", Some(8))));
        let cooling = Ok(Acquired::CoolingDown {
            remaining: ms(5_000),
            started: true,
        });
        let reserved = Ok(Acquired::Reserved {
            identity: "c".into(),
            remaining: ms(500),
        });
        // attempt -> what to release
        let cases = [
            (
                won,
                GiveBack::Term(FencingToken(9)),
                "a grant is released by its token",
            ),
            (
                no_answer,
                GiveBack::AnyTerm,
                "no answer: the script may have run, release any term of ours",
            ),
            (
                refused,
                GiveBack::AnyTerm,
                "a broken link is no answer either",
            ),
            (held, GiveBack::Nothing, "held by another: nothing is ours"),
            (cooling, GiveBack::Nothing, "cooling down: nothing was won"),
            (
                reserved,
                GiveBack::Nothing,
                "reserved for another: nothing was won",
            ),
        ];
        for (attempt, want, why) in cases {
            assert_eq!(give_back(&attempt), want, "{why}");
        }
    }

    #[test]
    fn a_follower_says_so_once_per_new_leader() {
        let info = |owner: &str| LeaderInfo {
            owner: owner.to_owned(),
            identity: owner.to_owned(),
            token: None,
        };
        let following = |owner: Option<&str>| Role::Follower {
            leader: owner.map(info),
            cooldown: None,
        };
        let a = info("a");
        // (role so far, leader seen) -> changed
        let cases = [
            (Role::Starting, Some(&a), true, "the first leader seen"),
            (following(None), Some(&a), true, "a leader after nobody"),
            (
                following(Some("a")),
                Some(&a),
                false,
                "the same leader again",
            ),
            (following(Some("b")), Some(&a), true, "another leader"),
            (
                following(Some("a")),
                None,
                false,
                "nobody leads: nothing to follow",
            ),
            (Role::Stopped, None, false, "nothing seen"),
        ];
        for (before, leader, want, why) in cases {
            assert_eq!(leader_changed(&before, leader), want, "{why}");
        }
    }
}
