//! The candidate check as a gate: its verdict ([`Candidacy`]) keeps the gate ([`CANDIDACY`]) and
//! what the replica shows in step, and each fall into unhealthy is counted.

use std::sync::Arc;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::judge::newly_unhealthy;
use crate::board::{Board, Candidacy, GateHooks};
use crate::elector::Standing;
pub use crate::gates::CANDIDACY;

/// Keeps `gate` and what `board` shows in step with the candidate check's `verdicts`, telling
/// `told` each time the check turns this replica unhealthy, until `stop` is cancelled or the
/// check is gone. The loop reads the gate: no contending while the check keeps this replica
/// out, and a leader steps down with reason `unhealthy`.
pub fn follow(
    mut verdicts: watch::Receiver<Candidacy>,
    gate: watch::Sender<Standing>,
    board: Board,
    told: Arc<dyn GateHooks>,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let now = verdicts.borrow_and_update().clone();
            // The gate first: the loop reads it.
            gate.send_replace(standing(&now));
            let mut became_unhealthy = false;
            board.modify_if(|s| {
                if s.candidacy == now {
                    return false;
                }
                became_unhealthy = newly_unhealthy(&s.candidacy, &now);
                s.candidacy = now.clone();
                true
            });
            if became_unhealthy {
                told.candidate_unhealthy();
            }
            tokio::select! {
                biased;
                _ = stop.cancelled() => return,
                changed = verdicts.changed() => if changed.is_err() { return },
            }
        }
    })
}

/// What the gate says for `candidacy`.
pub fn standing(candidacy: &Candidacy) -> Standing {
    match candidacy.stands() {
        true => Standing::Stands,
        false => Standing::Out {
            gate: CANDIDACY,
            detail: candidacy.reason().map(str::to_owned),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_candidate_check_counts_each_fall_into_unhealthy_once() {
        let unhealthy = |r: &str| Candidacy::Unhealthy { reason: r.into() };
        let pending = Candidacy::Pending {
            reason: "initial delay".into(),
        };
        // (before, now) -> newly unhealthy
        let cases = [
            (
                Candidacy::Healthy,
                unhealthy("probe failed"),
                true,
                "healthy to unhealthy",
            ),
            (
                pending.clone(),
                unhealthy("probe failed"),
                true,
                "pending to unhealthy",
            ),
            (
                Candidacy::Unchecked,
                unhealthy("x"),
                true,
                "unchecked to unhealthy",
            ),
            (
                unhealthy("a"),
                unhealthy("b"),
                false,
                "new words, the same fall",
            ),
            (
                unhealthy("a"),
                Candidacy::Healthy,
                false,
                "recovering is not a fall",
            ),
            (
                Candidacy::Healthy,
                pending,
                false,
                "pending is not unhealthy",
            ),
        ];
        for (before, now, want, why) in cases {
            assert_eq!(newly_unhealthy(&before, &now), want, "{why}");
        }
    }
}
