//! What a follower makes of what it saw: the observed-time rule and the release that lets go of
//! it, what to give back after an acquire that raced shutdown, and when the leader is new; how
//! long a holder's TTL is kept, and which release is a replica's own.

use std::time::Duration;

use super::channel::Wakeup;
use crate::clock::BootInstant;
use crate::elector::{LeaderInfo, Role, Timing};
use crate::lease::{Acquired, FencingToken, Holder, LeaseError, split_term};

/// client-go's observed-time rule (docs/DESIGN.md, "Followers keep what they saw"): whether, at
/// `now`, a holder observed until `observed_until` still stands (and goes with the next
/// acquire): not once it ran out, nor once the holder announced its release.
pub fn observation_stands(
    now: BootInstant,
    observed_until: BootInstant,
    release_announced: bool,
) -> bool {
    !release_announced && now < observed_until
}

/// How long a holder seen with `ttl_left` keeps its term as far as this follower knows: its
/// TTL, unless that is longer than any lease duration ([`Timing::MAX`]): such a TTL is no term's
/// doing (a foreign `EXPIRE` on a dead leader's key), and nothing of it outlives the key.
pub fn observed_for(ttl_left: Duration) -> Option<Duration> {
    (ttl_left <= Timing::MAX).then_some(ttl_left)
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

/// Whether a released `term` is one of this process's own (`owner`), such as the give-back of
/// a win that `WAIT` did not confirm: its announcement tells this replica nothing.
pub(crate) fn own_release(term: &str, owner: &str) -> bool {
    matches!(split_term(term), (of, Some(_)) if of == owner)
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
    use super::super::tests::{at, ms};
    use super::*;
    use crate::lease::Grant;

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

    #[test]
    fn only_a_release_of_its_own_process_is_its_own() {
        let own = crate::lease::OwnerId::generate("pod-a").unwrap();
        let other = crate::lease::OwnerId::generate("pod-a").unwrap();
        let cases = [
            (format!("{own}#17"), true),
            (format!("{own}2#17"), false),
            (format!("{other}#17"), false),
            (format!("taken {own}#17"), false),
            (own.to_string(), false),
        ];
        for (term, want) in cases {
            assert_eq!(own_release(&term, own.as_str()), want, "{term}");
        }
    }

    #[test]
    fn a_ttl_longer_than_any_term_is_not_kept() {
        let hour = Timing::MAX;
        // ttl left -> kept for
        let cases = [
            (ms(3_000), Some(ms(3_000))),
            (hour, Some(hour)),
            (hour + ms(1), None),
            (ms(7_200_000), None),
            (ms(0), Some(ms(0))),
        ];
        for (left, want) in cases {
            assert_eq!(observed_for(left), want, "{left:?}");
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
            lead: crate::clock::WallLead::default(),
            previous: crate::lease::PreviousTerm::None,
            redis_us: 0,
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
            remaining: Some(ms(500)),
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
