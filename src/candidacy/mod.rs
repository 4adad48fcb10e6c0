//! Health-gated candidacy: a check (`--candidate-check` URL or `--candidate-check-command`) run
//! like a Kubernetes probe, whose verdict gates the election. While it keeps this replica out, a
//! follower does not contend and a leader steps down with reason `unhealthy`; once it passes
//! again, the replica rejoins.
//!
//! With a singleton command the check is the command's: it runs only while leading (the
//! command runs only then) and is not judged before the initial delay has passed since the
//! command started, at the term's start or a restart (the start-up grace); a follower stands. After an unhealthy term the replica sits out
//! one lease duration, so that another replica takes the lease first.
//!
//! Here: the checking loop; one run of the check in `probe.rs`, the verdict in `judge.rs`
//! (pure); the verdict as a gate in `gate.rs`; the validated settings in `settings.rs` (the
//! flags that build them are the CLI's).

mod gate;
mod judge;
mod probe;
mod settings;

use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

pub use crate::board::Candidacy;
use crate::elector::{Role, Status};
use crate::lease::FencingToken;
pub use gate::{CANDIDACY, follow, standing};
use judge::{Tally, Thresholds, judge};
pub use settings::{
    CandidateCheck, DEFAULT_FAILURE_THRESHOLD, DEFAULT_PERIOD, DEFAULT_SUCCESS_THRESHOLD,
    DEFAULT_TIMEOUT, Probe, Scope,
};

/// Starts the check; its verdicts go to the returned receiver (for [`follow`], the gate).
/// `status` is the elector's, read for the terms in [`Scope::Command`], and `starts` the
/// command's starts, at each of which its start-up grace begins again. Stops when `stop` is
/// cancelled.
pub fn spawn(
    check: CandidateCheck,
    status: watch::Receiver<Status>,
    starts: Option<watch::Receiver<u64>>,
    stop: CancellationToken,
) -> watch::Receiver<Candidacy> {
    let first = match check.scope {
        Scope::Replica => Candidacy::Pending {
            reason: format!(
                "not checked yet (initial delay {})",
                humantime::format_duration(check.initial_delay)
            ),
        },
        Scope::Command { .. } => Candidacy::Unchecked,
    };
    let (tx, rx) = watch::channel(first);
    let identity = status.borrow().identity.clone();
    let verdicts = Verdicts { tx, identity };
    tokio::spawn(async move {
        tokio::select! {
            biased;
            _ = stop.cancelled() => {}
            _ = async {
                match check.scope {
                    Scope::Replica => probe_after_grace(&check, &verdicts).await,
                    Scope::Command { hold_off } => check_command(&check, hold_off, status, starts, &verdicts).await,
                }
            } => {}
        }
    });
    rx
}

/// Where verdicts go, said in the logs when they change whether this replica stands.
struct Verdicts {
    tx: watch::Sender<Candidacy>,
    identity: String,
}

impl Verdicts {
    fn now(&self) -> Candidacy {
        self.tx.borrow().clone()
    }

    fn set(&self, verdict: Candidacy) {
        let was = self.now();
        if was.stands() && !verdict.stands() {
            warn!(
                identity = %self.identity,
                reason = verdict.reason().unwrap_or(""),
                "the candidate check failed; standing aside from the election"
            );
        } else if !was.stands() && verdict.stands() {
            info!(identity = %self.identity, "the candidate check passes; standing for election");
        }
        self.tx.send_if_modified(|v| {
            let changed = *v != verdict;
            *v = verdict;
            changed
        });
    }
}

/// The start-up grace, then a probe every period, each judged with the tally so far: a
/// replica's app from start, forever; the singleton command's during each term.
async fn probe_after_grace(check: &CandidateCheck, verdicts: &Verdicts) {
    tokio::time::sleep(check.initial_delay).await;
    let thresholds = Thresholds {
        failure: check.failure_threshold,
        success: check.success_threshold,
    };
    let mut tally = Tally::default();
    loop {
        let result = check.probe.run(check.timeout).await;
        let (verdict, next) = judge(&verdicts.now(), tally, result, thresholds);
        tally = next;
        verdicts.set(verdict);
        tokio::time::sleep(check.period).await;
    }
}

/// The singleton command: during each term, after the start-up grace, which begins again at
/// each start of the command (`--restart-command`).
async fn check_command(
    check: &CandidateCheck,
    hold_off: Duration,
    mut status: watch::Receiver<Status>,
    mut starts: Option<watch::Receiver<u64>>,
    verdicts: &Verdicts,
) {
    loop {
        let term = match status.wait_for(|s| leading(s).is_some()).await {
            Ok(s) => leading(&s),
            Err(_) => return,
        };
        let Some(token) = term else { continue };
        let mut ended = status.clone();
        let term_ended = ended.wait_for(|s| leading(s) != Some(token));
        tokio::pin!(term_ended);
        // The start-up grace, then the checks, until the term ends; again from a new start.
        loop {
            let started = async {
                let Some(starts) = starts.as_mut() else {
                    return std::future::pending().await;
                };
                if starts.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                _ = &mut term_ended => break,
                _ = started => verdicts.set(Candidacy::Unchecked),
                _ = probe_after_grace(check, verdicts) => break,
            }
        }
        if !verdicts.now().stands() {
            // Sit out, so that another replica takes the lease before this one again.
            tokio::time::sleep(hold_off).await;
        }
        verdicts.set(Candidacy::Unchecked);
    }
}

/// The token of the term this replica leads, if it does.
fn leading(status: &Status) -> Option<FencingToken> {
    match status.role {
        Role::Leader { token, .. } => Some(token),
        _ => None,
    }
}
