//! A replica's leader steps in the model: the watchdog's renewal or step-down, the renewal's
//! reply or its timeout, and the step-down, with the release to send and the pause before the
//! next term. Each step decides by leasehold's own pure decisions (`elector::decide`).

use leasehold_core::clock::BootInstant;
use leasehold_core::elector::StepDownReason;
use leasehold_core::elector::decide::{self, RateBound, WatchdogStep};

use crate::link::Request;
use crate::mirror::{RenewReply, Successor};
use crate::replica::{Ending, Renewal, Replica, Role};

impl Replica {
    /// The watchdog wakes: step down (the reason) or send a renewal.
    pub fn watchdog(&mut self, now: BootInstant) -> Result<Request, StepDownReason> {
        let Role::Leader(lead) = &mut self.role else {
            return Err(StepDownReason::Lost);
        };
        match decide::watchdog_step(
            now,
            lead.valid_until,
            lead.renew_by,
            self.timings.timing().renew_attempt_timeout(),
        ) {
            WatchdogStep::StepDown(reason) => Err(reason),
            WatchdogStep::Renew { timeout } => {
                lead.renewing = Some((now, timeout));
                Ok(Request::Renew { term: lead.term })
            }
        }
    }

    /// The renewal's reply, or its timeout (`None`). `Err` carries a step-down.
    pub fn renewed(
        &mut self,
        now: BootInstant,
        reply: Option<Renewal>,
        rate: Option<RateBound>,
    ) -> Result<(), Ending> {
        let Role::Leader(lead) = &mut self.role else {
            return Ok(());
        };
        let Some((sent_at, _)) = lead.renewing.take() else {
            return Ok(());
        };
        let t = self.timings.timing();
        match reply {
            Some(Renewal::Refused) => Err(StepDownReason::RenewRefused.into()),
            Some(Renewal::Ran(RenewReply::Held { handover, .. })) => {
                // The elector's own rule: deadlines from the send instant, and a reply after
                // the validity it would extend ends the term.
                let deadlines = decide::after_renewal(now, sent_at, &t, rate)?;
                lead.valid_until = deadlines.valid_until;
                lead.renew_by = deadlines.renew_by;
                lead.next_renew = deadlines.next_renew;
                if std::mem::take(&mut lead.nudged) {
                    lead.next_renew = now;
                }
                // A requested handover is a renewal like any other, then the end of the term.
                match handover {
                    None => Ok(()),
                    Some(to) => Err(Ending {
                        reason: StepDownReason::Handover,
                        hand_to: match to {
                            Successor::Anyone => None,
                            Successor::Named(name) => Some(name),
                        },
                    }),
                }
            }
            Some(Renewal::Ran(RenewReply::NotOurs)) => Err(StepDownReason::Lost.into()),
            None => {
                lead.next_renew =
                    decide::retry_after_failure(sent_at, now, &t, lead.valid_until, lead.renew_by);
                if std::mem::take(&mut lead.nudged) {
                    lead.next_renew = lead.next_renew.min(now);
                }
                Ok(())
            }
        }
    }

    /// Step-down: the guard refuses from here on; the release to send, if any (reserving the
    /// next term for a named successor). The replica contends again after the pause that term
    /// pacing or a handover's hold-off asks for, or leaves when its terms are used up.
    pub fn step_down(
        &mut self,
        now: BootInstant,
        ending: Ending,
        max_terms: u8,
    ) -> Option<Request> {
        let reason = ending.reason;
        let Role::Leader(lead) = self.role else {
            return None;
        };
        let t = self.timing();
        let lasted = now.saturating_duration_since(lead.acquired_at);
        // The model's step-down pauses in full; whether the release lands is the network's.
        // The model has no release channel to count listeners on: never alone.
        let ended = decide::TermEnd {
            reason,
            released: true,
            alone: false,
        };
        let between = decide::between_terms(self.short_terms, &ended, lasted, &t);
        self.short_terms = between.short_terms;
        let pause = between.paced.max(between.hold_off);
        self.observed = None;
        self.announced = false;
        self.role = if self.terms >= max_terms {
            Role::Done
        } else if pause.is_zero() {
            Role::Follower { next_try: now }
        } else {
            Role::Paused {
                until: now.saturating_add(pause),
            }
        };
        reason.may_still_hold().then_some(Request::Release {
            term: lead.term,
            reserve: ending.hand_to,
        })
    }
}
