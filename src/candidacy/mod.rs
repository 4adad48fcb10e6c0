//! Health-gated candidacy: a check (`--candidate-check` URL or `--candidate-check-command`) run
//! like a Kubernetes probe, whose verdict gates the election. While it keeps this replica out, a
//! follower does not contend and a leader steps down with reason `unhealthy`; once it passes
//! again, the replica rejoins.
//!
//! With a singleton command the check is the command's: it runs only while leading (the
//! command runs only then) and is not judged before the initial delay has passed since the
//! command started, at the term's start or a restart (the start-up grace); a follower stands.
//! After an unhealthy term the replica sits out one lease duration, so that another replica
//! takes the lease first.
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
use crate::exec::CommandRun;
use crate::lease::FencingToken;
pub use gate::{CANDIDACY, follow, standing};
use judge::{Tally, Thresholds, judge, newly_unhealthy};
pub use settings::{
    CandidateCheck, DEFAULT_FAILURE_THRESHOLD, DEFAULT_PERIOD, DEFAULT_SUCCESS_THRESHOLD,
    DEFAULT_TIMEOUT, Probe, Scope,
};

/// Starts the check; its verdicts go to the returned receiver (for [`follow`], the gate).
/// `status` is the elector's, read for the terms in [`Scope::Command`], and `runs` the
/// command's starts and exits (the command's check). Stops when `stop` is cancelled.
pub fn spawn(
    check: CandidateCheck,
    status: watch::Receiver<Status>,
    runs: Option<watch::Receiver<CommandRun>>,
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
                    Scope::Replica => probe_after_grace(&check, &verdicts, &mut Tally::default()).await,
                    Scope::Command { hold_off } => check_command(&check, hold_off, status, runs, &verdicts).await,
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
        if newly_unhealthy(&was, &verdict) {
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

    /// The verdict after one more `result`, counted in `tally`.
    fn judge(&self, tally: &mut Tally, result: Result<(), String>, check: &CandidateCheck) {
        let thresholds = Thresholds {
            failure: check.failure_threshold,
            success: check.success_threshold,
        };
        let (verdict, next) = judge(&self.now(), *tally, result, thresholds);
        *tally = next;
        self.set(verdict);
    }
}

/// The start-up grace, then a probe every period, each judged with `tally`, the results so far:
/// a replica's app from start, forever; the singleton command's during each term.
async fn probe_after_grace(check: &CandidateCheck, verdicts: &Verdicts, tally: &mut Tally) {
    tokio::time::sleep(check.initial_delay).await;
    loop {
        let result = check.probe.run(check.timeout).await;
        verdicts.judge(tally, result, check);
        tokio::time::sleep(check.period).await;
    }
}

/// The command's next start or exit in term `token`.
async fn next_run(
    runs: &mut Option<watch::Receiver<CommandRun>>,
    token: FencingToken,
) -> CommandRun {
    let Some(runs) = runs.as_mut() else {
        return std::future::pending().await;
    };
    loop {
        if runs.changed().await.is_err() {
            return std::future::pending().await;
        }
        let run = *runs.borrow_and_update();
        if run.term == token {
            return run;
        }
    }
}

/// The singleton command: during each term while it runs, after the start-up grace, which
/// begins again at each start; a restart (`--restart-command`) counts as a failed check, so
/// that a command that crashes again and again is unhealthy within the term.
async fn check_command(
    check: &CandidateCheck,
    hold_off: Duration,
    mut status: watch::Receiver<Status>,
    mut runs: Option<watch::Receiver<CommandRun>>,
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
        // The start-up grace, then the checks, until the term ends; again from each start.
        let (mut tally, mut running) = (Tally::default(), true);
        loop {
            let run = tokio::select! {
                biased;
                _ = &mut term_ended => break,
                run = next_run(&mut runs, token) => run,
                _ = probe_after_grace(check, verdicts, &mut tally), if running => break,
            };
            running = run.running;
            if running && run.number > 1 {
                let exited = "the command exited and was started again".to_owned();
                verdicts.judge(&mut tally, Err(exited), check);
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
