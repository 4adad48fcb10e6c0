//! The elector's cycle: follow until a term is won, lead it, then (unless the elector is done)
//! pause or hold off as the term's end asks before following again.

use std::fmt::Display;
use std::future::Future;

use tokio_util::sync::CancellationToken;
use tracing::info;

use super::notify::Releases;
use super::{Elector, Leadership, SitOut, SitOutReason, StepDownReason, decide};

impl Elector {
    /// Terms one after another until shutdown, or until the elector is done (see
    /// [`decide::contends_again`]).
    pub(super) async fn contend<W, Fut, E>(
        &self,
        shutdown: &CancellationToken,
        releases: &mut Releases,
        work: &mut W,
    ) where
        W: FnMut(Leadership) -> Fut,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: Display + Send + 'static,
    {
        let clock = self.lease.clock().clone();
        let give_up_at = self.one_term.map(|wait| clock.now().saturating_add(wait));
        let mut nudges = releases.handover_nudges();
        let mut short_terms: u32 = 0;
        // After a handover or a term it could not renew: the hold-off.
        let mut held: Option<decide::HoldOff> = None;
        let mut last_led = None;
        loop {
            let Some(grant) = self
                .follow(shutdown, releases, give_up_at, held, last_led)
                .await
            else {
                return;
            };
            last_led = Some(grant.token);
            let ended = self.lead(grant, work, shutdown, &mut nudges).await;
            let (ending, released) = (ended.reason, ended.released);
            if !decide::contends_again(ending, self.stop_when_work_ends, self.one_term.is_some()) {
                return;
            }
            let lasted = clock.now().saturating_duration_since(grant.sent_at);
            let between = decide::between_terms(short_terms, &ended, lasted, &self.timing);
            short_terms = between.short_terms;
            held = None;
            if !between.hold_off.is_zero() {
                let identity = self.lease.owner().identity();
                let lease = self.lease.name();
                let hold_off_ms = between.hold_off.as_millis() as u64;
                if ending == StepDownReason::Handover {
                    info!(%identity, %lease, token = grant.token.0, hold_off_ms, "handed over; holding off before contending again");
                } else {
                    info!(%identity, %lease, token = grant.token.0, hold_off_ms, "could not renew; letting the others try first");
                }
                let since = clock.now();
                let hold = decide::HoldOff {
                    since,
                    until: since.saturating_add(between.hold_off),
                    offered: released,
                };
                held = Some(hold);
            }
            if !between.paced.is_zero() {
                let refused = ending == StepDownReason::RenewRefused;
                if refused {
                    // Said (warning), shown (readiness, `/leader`, metric) for the whole pause.
                    let detail = self
                        .status
                        .borrow()
                        .last_step_down
                        .as_ref()
                        .and_then(|s| s.detail.clone());
                    self.sit_out(Some(SitOut {
                        reason: SitOutReason::RenewRefused,
                        detail: format!(
                            "{}; contending again in {} ms",
                            detail.as_deref().unwrap_or("redis refused the renewal"),
                            between.paced.as_millis()
                        ),
                    }));
                } else {
                    info!(
                        identity = %self.lease.owner().identity(),
                        lease = %self.lease.name(),
                        token = grant.token.0,
                        short_terms,
                        pause_ms = between.paced.as_millis() as u64,
                        "the work failed soon after the term began; pausing before contending again"
                    );
                }
                self.hooks.each(|h| h.beat(Some(between.paced)));
                tokio::select! {
                    biased;
                    _ = shutdown.cancelled() => return,
                    _ = clock.sleep_until(clock.now().saturating_add(between.paced)) => {}
                }
                if refused {
                    self.sit_out(None);
                }
            }
        }
    }
}
