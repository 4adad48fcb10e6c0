//! The candidacy gate: carries what the candidate check says into the
//! status, where the follower loop (no contending while the check keeps this replica out) and
//! the leader's term (step down with reason `unhealthy`) read it.

use std::sync::Arc;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{Candidacy, Observer, Status, decide};

/// Starts the gate; it stops when `stop` is cancelled or the check is gone.
pub(crate) fn spawn(
    mut candidacy: watch::Receiver<Candidacy>,
    status: watch::Sender<Status>,
    observer: Arc<dyn Observer>,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let now = candidacy.borrow_and_update().clone();
            let mut became_unhealthy = false;
            status.send_if_modified(|s| {
                if s.candidacy == now {
                    return false;
                }
                became_unhealthy = decide::newly_unhealthy(&s.candidacy, &now);
                s.candidacy = now.clone();
                true
            });
            if became_unhealthy {
                observer.candidate_unhealthy();
            }
            tokio::select! {
                biased;
                _ = stop.cancelled() => return,
                changed = candidacy.changed() => if changed.is_err() { return },
            }
        }
    })
}
