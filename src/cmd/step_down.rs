//! `leasehold step-down`: asks the current leader, through Redis, to hand over, and waits until
//! another replica (or the one named by `--to`) leads. Works from anywhere that has the lease's
//! Redis credentials, in or out of the cluster; no HTTP endpoint changes leadership.
//!
//! How the request is bound to the leader's term, and why it cannot make two leaders:
//! docs/DEPLOY.md (step-down). The command waits on the release channel for that term's
//! release, and then looks for the successor.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde::Serialize;

use super::lease::{CALL, asked_lease};
use super::status::{said_if_replica, view_of};
use crate::cli::{CliError, StepDownSettings};
use crate::lease::{
    HandoverRequested, Heard, Holder, LeaseError, LeaseName, Observation, RedisLease,
    ReleaseSubscription,
};
use crate::notices::{not_leaseholds, reservation_not_leaseholds};

/// How often the command looks whether the lease changed hands when it cannot hear releases.
const POLL: Duration = Duration::from_millis(50);
/// How often it looks while the old term's release is not heard.
const UNHEARD: Duration = Duration::from_secs(1);
/// The least a look is given, also the last one, at the wait's end: a Redis slow for a moment
/// then (a fork, a slow command) is still read, and the wait runs over by a second at most.
const LAST_LOOK: Duration = Duration::from_secs(1);
/// The first pause between looks after the release was heard, doubling up to [`UNHEARD`].
const AFTER_RELEASE: Duration = Duration::from_millis(2);

/// What `leasehold step-down` prints (`--output json`: one object; fields in docs/REFERENCE.md).
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct HandoverView {
    pub lease: String,
    pub handed_over: bool,
    pub previous: String,
    pub previous_token: Option<u64>,
    pub leader: Option<String>,
    pub token: Option<u64>,
    pub waited_ms: u64,
}

impl HandoverView {
    /// Aligned text for people.
    pub fn text(&self) -> String {
        let token = |t: Option<u64>| t.map_or_else(|| "-".to_owned(), |t| t.to_string());
        // Identities as Redis holds them: a value leasehold did not write is shown escaped.
        let (leader, previous) = (
            self.leader.as_deref().map(super::printable),
            super::printable(&self.previous),
        );
        match (leader, self.handed_over) {
            (Some(leader), true) => format!(
                "{leader} leads {} with token {} (was {previous}, token {}; after {} ms)\n",
                self.lease,
                token(self.token),
                token(self.previous_token),
                self.waited_ms
            ),
            (Some(leader), false) => format!(
                "{leader} leads {} with token {} (asked {previous} to step down {} ms ago)\n",
                self.lease,
                token(self.token),
                self.waited_ms
            ),
            (None, _) => format!(
                "nobody leads {} (asked {previous} to step down {} ms ago)\n",
                self.lease, self.waited_ms
            ),
        }
    }
}

/// What the command waits for, decided from one look at the lease.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Progress {
    /// The old term still holds, or nobody leads yet.
    Waiting,
    /// A new term began, of the wanted replica.
    Done(Holder),
    /// A new term began, of another replica than the one named, or of the old leader itself
    /// (nobody else took the lease, so it took it back after its hold-off's yield): it will not
    /// change hands again before that term ends.
    Other(Holder),
}

fn progress(old: &Holder, to: Option<&str>, seen: &Observation) -> Progress {
    match &seen.holder {
        // A value without expiry, which leasehold never writes: nobody leads until it is deleted.
        Some(now) if not_leaseholds(now) => Progress::Other(now.clone()),
        Some(now) if now.term_value() != old.term_value() => match to {
            // The same process (its owner id; two processes may share an identity).
            _ if now.owner == old.owner => Progress::Other(now.clone()),
            Some(to) if now.identity() != to => Progress::Other(now.clone()),
            _ => Progress::Done(now.clone()),
        },
        _ => Progress::Waiting,
    }
}

/// What a lease key that never expires means, for the error line.
fn never_expires(lease: &LeaseName, holder: &Holder) -> String {
    format!(
        "the lease key of {lease} holds `{}` and never expires (not written by leasehold): nobody leads until it is deleted",
        super::printable(&holder.owner)
    )
}

/// Asks the leader of the lease to hand over and waits; returns the exit code.
pub async fn step_down(settings: StepDownSettings) -> Result<i32, CliError> {
    let StepDownSettings { status, to, wait } = settings;
    let lease = asked_lease(&status, "leasehold-step-down").await?;
    let lease_name = lease.name();
    let seen = lease
        .observe(CALL)
        .await
        .map_err(|e| status.redis.failed(e))?;
    if said_if_replica(&view_of(&lease, &seen).await) {
        return Ok(1);
    }
    let old = match seen.holder {
        Some(holder) if not_leaseholds(&holder) => {
            say!(
                "{}, and there is no leader to step down",
                never_expires(lease_name, &holder)
            );
            return Ok(1);
        }
        // Not `<owner id>#<token>`: a value some other program wrote, with an expiry.
        Some(holder) if holder.token.is_none() && !holder.vanished => {
            say!(
                "the lease key of {lease_name} holds `{}`, no term of a replica (not written by leasehold): there is no leader to step down",
                super::printable(&holder.owner)
            );
            return Ok(1);
        }
        Some(holder) if !holder.vanished => holder,
        Some(_) => {
            say!(
                "the lease key of {lease_name} is gone before its time (evicted or deleted); its holder repairs it at its next renewal; try again"
            );
            return Ok(1);
        }
        None => {
            say!("nobody leads {lease_name}: there is no leader to step down");
            return Ok(1);
        }
    };
    // A reservation without expiry keeps every replica but the one it names out: the leader's
    // renewals do not read it, so it leads on, but after a handover only that one could.
    if let Some((who, _)) = (seen.reserved.as_ref())
        .filter(|(who, left)| reservation_not_leaseholds(*left) && to.as_ref() != Some(who))
    {
        let who = super::printable(who);
        say!(
            "{} holds `{who}` and never expires (not written by leasehold): after a handover nobody but `{who}` could lead {lease_name}; delete it first (`DEL {0}`), or hand over with --to {who}",
            lease.keys().reserved
        );
        return Ok(1);
    }
    if to.as_deref() == Some(old.identity()) {
        return Err(CliError::Refused(format!(
            "--to `{}`: is the leader already; name another replica, or leave --to out to hand over to any",
            old.identity()
        )));
    }
    // Listening before the request: the old term's release is what the wait waits for. Without
    // a subscription (an ACL without the channel) it looks every POLL, then less and less often.
    let releases = lease.subscribe_releases(CALL).await.ok();
    let started = Instant::now();
    let unanswered = match lease
        .request_handover(&old, to.as_deref(), wait, CALL)
        .await
    {
        Ok(HandoverRequested::Requested) => None,
        Ok(HandoverRequested::TermEnded) => {
            say!(
                "the term of {} (token {}) ended before the request reached it; nothing was asked",
                super::printable(old.identity()),
                old.token.map(|t| t.0).unwrap_or_default()
            );
            return Ok(1);
        }
        // Sent, and its answer lost: it may yet reach Redis and the leader, and lives as long as
        // the wait, which looks for its effect as for any request.
        Err(err @ LeaseError::Timeout { .. }) => Some(err),
        Err(err) => return Err(status.redis.failed(err).into()),
    };
    let (handed_over, now) =
        wait_for_successor(&lease, &old, to.as_deref(), started, wait, releases)
            .await
            .map_err(|e| status.redis.failed(e))?;
    // A key without expiry that appeared meanwhile is nobody's term.
    let (blocked, now) = match now {
        Some(now) if not_leaseholds(&now) => (Some(now), None),
        now => (None, now),
    };
    let view = HandoverView {
        lease: lease_name.to_string(),
        handed_over,
        previous: old.identity().to_owned(),
        previous_token: old.token.map(|t| t.0),
        leader: now.as_ref().map(|h| h.identity().to_owned()),
        token: now.as_ref().and_then(|h| h.token).map(|t| t.0),
        waited_ms: started.elapsed().as_millis() as u64,
    };
    super::print(status.output, &view, HandoverView::text)?;
    if let Some(blocked) = blocked {
        say!("{}", never_expires(lease_name, &blocked));
    } else if !handed_over {
        match (&to, &view.leader) {
            (Some(to), Some(leader)) if leader != &view.previous => say!(
                "{} took the lease, not {to} (it did not take it within its reservation)",
                super::printable(leader)
            ),
            _ => say!(
                "no other replica led {lease_name} within --wait {}{}",
                humantime::format_duration(wait),
                unanswered.map_or_else(String::new, |err| format!(
                    "; the request went unanswered ({err}), so it may not have reached the leader"
                ))
            ),
        }
    }
    Ok(if handed_over { 0 } else { 1 })
}

/// Looks at the lease until a new term began or `wait` passed since `started`: whether the
/// wanted replica leads, and who leads at the end. It looks every [`UNHEARD`] until `releases`
/// tells the old term's release, then at once and less and less often. A failed look is retried
/// until the wait is over; when the last one failed too, that error is the answer.
async fn wait_for_successor(
    lease: &RedisLease,
    old: &Holder,
    to: Option<&str>,
    started: Instant,
    wait: Duration,
    mut releases: Option<ReleaseSubscription>,
) -> Result<(bool, Option<Holder>), LeaseError> {
    let end = started + wait;
    let released = old.term_value();
    let mut pause = if releases.is_some() { UNHEARD } else { POLL };
    loop {
        // Within the wait: a look that Redis leaves unanswered ends with it, or a moment after.
        let left = end.saturating_duration_since(Instant::now());
        let looked = lease.observe(CALL.min(left).max(LAST_LOOK)).await;
        let over = Instant::now() >= end;
        match looked {
            Ok(seen) => match progress(old, to, &seen) {
                Progress::Done(now) => return Ok((true, Some(now))),
                Progress::Other(now) => return Ok((false, Some(now))),
                Progress::Waiting if over => return Ok((false, seen.holder)),
                Progress::Waiting => {}
            },
            Err(err) if over => return Err(err),
            Err(_) => {}
        }
        let next = (Instant::now() + pause).min(end);
        pause = loop {
            let heard = async {
                match releases.as_mut() {
                    Some(releases) => releases.next().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                heard = heard => match heard {
                    Some(Heard::Release(r)) if r.term == released => break AFTER_RELEASE,
                    Some(_) => {}
                    None => {
                        releases = None;
                        break POLL;
                    }
                },
                _ = tokio::time::sleep_until(next.into()) => break (pause * 2).min(UNHEARD),
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lease::{CooldownState, FencingToken};

    fn holder(owner: &str, token: u64) -> Holder {
        Holder {
            owner: owner.to_owned(),
            remaining: Some(Duration::from_secs(10)),
            token: Some(FencingToken(token)),
            vanished: false,
        }
    }

    fn seen(holder: Option<Holder>) -> Observation {
        Observation {
            holder,
            cooldown: CooldownState::Idle,
            ..Observation::default()
        }
    }

    #[test]
    fn progress_table() {
        let a = "web-a-0b7c2b5e-6a4c-4a39-9a55-0d9b1b1f0c3e";
        let b = "web-b-1b7c2b5e-6a4c-4a39-9a55-0d9b1b1f0c3e";
        let a2 = "web-a-9f3d1c7a-2b4e-4c8d-8e1f-5a6b7c8d9e0f";
        let old = holder(a, 5);
        let foreign = Holder {
            remaining: None,
            token: None,
            ..holder("garbage", 0)
        };
        // (named, holder now) -> progress
        let cases = [
            (None, Some(holder(a, 5)), Progress::Waiting),
            (None, None, Progress::Waiting),
            (None, Some(holder(b, 6)), Progress::Done(holder(b, 6))),
            // The old leader in a new term took back what nobody else took: not a handover.
            (None, Some(holder(a, 7)), Progress::Other(holder(a, 7))),
            // Another process of the same identity (two replicas on one host) took it over.
            (None, Some(holder(a2, 7)), Progress::Done(holder(a2, 7))),
            (
                Some("web-b"),
                Some(holder(b, 6)),
                Progress::Done(holder(b, 6)),
            ),
            (
                Some("web-c"),
                Some(holder(b, 6)),
                Progress::Other(holder(b, 6)),
            ),
            (Some("web-b"), Some(holder(a, 5)), Progress::Waiting),
            // A value someone wrote without expiry: nobody's term, and the wait is over.
            (
                None,
                Some(foreign.clone()),
                Progress::Other(foreign.clone()),
            ),
        ];
        for (to, now, want) in cases {
            assert_eq!(
                progress(&old, to, &seen(now.clone())),
                want,
                "{to:?} {now:?}"
            );
        }
    }

    #[test]
    fn the_text_says_who_leads_now() {
        let view = HandoverView {
            lease: "shop/web".into(),
            handed_over: true,
            previous: "web-a".into(),
            previous_token: Some(5),
            leader: Some("web-b".into()),
            token: Some(6),
            waited_ms: 12,
        };
        assert_eq!(
            view.text(),
            "web-b leads shop/web with token 6 (was web-a, token 5; after 12 ms)\n"
        );
        let json = serde_json::to_value(&view).unwrap();
        assert_eq!(json["leader"], "web-b");
        assert_eq!(json["token"], 6);
    }
}
