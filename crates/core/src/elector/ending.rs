//! How a term ends: the reason a step-down gives and its words, from a handover, a step of
//! Redis's clock, a pause the boot clock did not count, or the work's own end.

use std::time::Duration;

use tokio::task::JoinError;
use tracing::warn;

use super::StepDownReason;
use super::decide::Jump;
use crate::lease::FencingToken;

/// How a term ended, with any words about it.
pub(super) struct Ending {
    pub(super) reason: StepDownReason,
    pub(super) detail: Option<String>,
    /// A handover's named successor, who alone may take the next term for a while.
    pub(super) hand_to: Option<String>,
}

impl Ending {
    pub(super) fn new(reason: StepDownReason) -> Self {
        Self::said(reason, None)
    }

    pub(super) fn said(reason: StepDownReason, detail: Option<String>) -> Self {
        Self {
            reason,
            detail,
            hand_to: None,
        }
    }

    pub(super) fn handover(to: Option<String>) -> Self {
        Self {
            reason: StepDownReason::Handover,
            detail: Some(match &to {
                Some(to) => format!("handing over to {to}"),
                None => "handing over to any replica".to_owned(),
            }),
            hand_to: to,
        }
    }
}

/// What a step of Redis's clock that a renewal's reply showed does to the term: a step forward
/// ends it (the lease expired early by about the step); a step back is said and harmless.
pub(super) fn clock_jumped(
    jump: Jump,
    identity: &str,
    lease: &str,
    token: FencingToken,
) -> Option<Ending> {
    match jump {
        Jump::None => None,
        Jump::Back(back) => {
            warn!(%identity, %lease, token = token.0, back_ms = back.as_millis() as u64, "redis's clock stepped back; keys live longer, the term goes on");
            None
        }
        Jump::Forward(step) => {
            let step_ms = step.as_millis() as u64;
            warn!(%identity, %lease, token = token.0, step_ms, "redis's clock stepped forward; the lease expired early by about the step");
            Some(Ending::said(
                StepDownReason::ClockStep,
                Some(format!(
                    "redis's clock stepped {step_ms} ms forward between two renewals: check NTP \
                     on the Redis host (after a failover: the new master's clock against the old)"
                )),
            ))
        }
    }
}

/// A deadline (the validity's or the renew deadline, `reason`) that passed only counting `unseen`,
/// time the boot clock did not count, is a pause of its own (`pause`), said with its length; the
/// deadline the boot clock alone says passed (`seen`), if one did, is the reason instead.
pub(super) fn unseen_pause(
    reason: StepDownReason,
    seen: Option<StepDownReason>,
    unseen: Duration,
    identity: &str,
    lease: &str,
) -> Ending {
    if let Some(seen) = seen {
        return Ending::new(seen);
    }
    let outlasted = match reason {
        StepDownReason::RenewDeadlinePassed => "the renew deadline",
        _ => "the term",
    };
    let unseen_ms = unseen.as_millis() as u64;
    warn!(
        %identity,
        %lease,
        unseen_ms,
        "the wall clock jumped ahead of the boot clock: time passed that this host did not count (a VM frozen, migrated or restored); the term counts it"
    );
    Ending::said(
        StepDownReason::Pause,
        Some(format!(
            "the wall clock gained {unseen_ms} ms on the boot clock: a pause the boot clock did not \
             count outlasted {outlasted}"
        )),
    )
}

/// Maps how the work's task ended to a step-down.
pub(super) fn work_ending(joined: Result<Result<(), String>, JoinError>) -> Ending {
    match joined {
        Ok(Ok(())) => Ending::new(StepDownReason::WorkEnded),
        Ok(Err(err)) => Ending::said(StepDownReason::WorkFailed, Some(err)),
        Err(join) if join.is_panic() => {
            Ending::said(StepDownReason::WorkPanicked, Some(panic_message(join)))
        }
        Err(_) => Ending::new(StepDownReason::WorkEnded),
    }
}

fn panic_message(join: JoinError) -> String {
    let payload = join.into_panic();
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic with a non-string payload".to_owned())
}
