//! The readiness verdict: from the elector's status and the mode, whether `/readyz` is 200,
//! and the words that say why.

use super::ReadinessMode;
use crate::board::Shown;
use crate::candidacy::Candidacy;
use crate::clock::BootInstant;
use crate::elector::Role;
use crate::eviction::{Eviction, EvictionRefusal};
use crate::lease::Protocol;

/// The readiness verdict and the words for it.
pub fn readiness(status: &Shown, mode: ReadinessMode, leading: bool) -> (bool, String) {
    let leader = || match status.leader_identity() {
        Some(l) => format!("following {l}"),
        None => "no leader known".to_owned(),
    };
    let last_step = || {
        status
            .last_step_down
            .as_ref()
            .map(|s| format!("; last step-down: {}", s.reason))
            .unwrap_or_default()
    };
    // An error Redis answered with (out of memory, a missing permission) says what it is;
    // one without an answer is the link's.
    let redis_error = status.redis.last_error.as_deref().map(|error| {
        if status.redis.reachable {
            error.to_owned()
        } else {
            format!("redis unreachable: {error}")
        }
    });
    let not = match mode {
        ReadinessMode::Leader => "not the leader",
        ReadinessMode::Member => "not ready",
    };
    let out = |why: String| (false, format!("{not}: {why}"));
    match (mode, &status.role) {
        (_, Role::Stopped) => return (false, "stopped".into()),
        (ReadinessMode::Leader, Role::Leader { token, .. }) if leading => {
            return (true, format!("leader (token {token})"));
        }
        (ReadinessMode::Leader, Role::Leader { .. }) => {
            return out("validity deadline passed, stepping down".into());
        }
        _ => {}
    }
    // What keeps a replica out in either mode, in this order.
    if !status.candidacy.stands() {
        return out(candidacy_words(&status.candidacy));
    }
    if let Some(sitting) = &status.sitting_out {
        return out(format!(
            "sitting out of the election ({}): {}",
            sitting.reason.as_label(),
            sitting.detail
        ));
    }
    match status.eviction_refusal {
        Some(EvictionRefusal::Asked) => {
            let may = if status.eviction.may_evict() {
                "may evict the lease"
            } else {
                "does not say whether it evicts"
            };
            return out(format!(
                "redis {may} ({}); --redis-eviction refuse keeps this replica out of the election",
                status.eviction
            ));
        }
        Some(EvictionRefusal::Unsafe) => {
            return out(format!(
                "redis may evict the lease's state record ({}) and --no-data-loss-cooldown is set: two replicas could lead, so this replica stays out of the election",
                status.eviction
            ));
        }
        None => {}
    }
    // A valid term stays ready through a failed call: the watchdog, not one error, ends it.
    if let Some(error) = redis_error.filter(|_| !leading) {
        return out(error);
    }
    if let Some(found) = &status.newer_protocol {
        return out(format!(
            "the lease is written in {found}, newer than this replica's {}: out of the election until the rollout to the newer release finishes",
            Protocol::ours()
        ));
    }
    if let Some(blocked) = &status.blocked {
        return out(format!(
            "`{}` holds `{}` and never expires (not written by leasehold): nobody leads until it is deleted",
            blocked.key, blocked.value
        ));
    }
    let cooldown = match status.cooldown_left(BootInstant::now()) {
        Some(left) => format!(
            "; cooling down for {} ms more: Redis lost the lease's state record (a restart without its data, FLUSHALL, a failover{}), and nobody leads until a lease duration has passed",
            left.as_millis(),
            match &status.eviction {
                Eviction::Read(p) if p.policy.starts_with("allkeys-") => {
                    format!(", or `{}` eviction under maxmemory", p.policy)
                }
                _ => String::new(),
            }
        ),
        _ => String::new(),
    };
    match (mode, &status.role) {
        (ReadinessMode::Leader, _) => out(format!("{}{}{cooldown}", leader(), last_step())),
        (ReadinessMode::Member, Role::Starting) => out("starting".into()),
        (ReadinessMode::Member, Role::Leader { .. }) if leading => (true, "member: leader".into()),
        (ReadinessMode::Member, Role::Leader { .. }) if status.redis.reachable => (
            true,
            "member: validity deadline passed, stepping down".into(),
        ),
        (ReadinessMode::Member, _) if !status.redis.reachable => {
            out("redis unreachable: no answer yet".into())
        }
        (ReadinessMode::Member, _) => (true, format!("member: {}{cooldown}", leader())),
    }
}

/// Why the candidate check keeps this replica out, for readiness.
fn candidacy_words(candidacy: &Candidacy) -> String {
    format!(
        "candidate check {}: {}; out of the election until it passes",
        candidacy.as_label(),
        candidacy.reason().unwrap_or("no reason given")
    )
}
