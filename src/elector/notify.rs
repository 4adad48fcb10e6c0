//! The release channel: a task that keeps a pub/sub subscription to the lease's channel and
//! turns every release (and every re-subscription, after which a release may have been missed)
//! into a wake-up for the follower.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::{Status, Timing};
use crate::lease::RedisLease;

/// The follower's side of the release channel. Whether it is subscribed lives in the
/// elector's status (`redis.subscribed`), its one place.
pub(crate) struct Releases {
    wakeups: watch::Receiver<u64>,
}

impl Releases {
    /// Marks every wake-up so far as seen. Call before a try, so that a release that lands
    /// during the try still wakes the sleep after it.
    pub(crate) fn mark_seen(&mut self) {
        self.wakeups.borrow_and_update();
    }

    /// Resolves at the next release (or re-subscription) not yet seen.
    pub(crate) async fn next(&mut self) {
        if self.wakeups.changed().await.is_err() {
            // The task ended (shutdown): never resolve, the caller's other branches decide.
            std::future::pending::<()>().await;
        }
    }
}

/// Records in the status whether a release would be heard right now.
fn set_subscribed(status: &watch::Sender<Status>, subscribed: bool) {
    status.send_if_modified(|s| {
        let changed = s.redis.subscribed != subscribed;
        s.redis.subscribed = subscribed;
        changed
    });
}

/// Starts the subscription task; it stops when `stop` is cancelled.
pub(crate) fn spawn(
    lease: Arc<RedisLease>,
    timing: Timing,
    status: watch::Sender<Status>,
    stop: CancellationToken,
) -> (Releases, tokio::task::JoinHandle<()>) {
    let (wake_tx, wakeups) = watch::channel(0u64);
    let task = tokio::spawn(async move {
        let mut failures: u32 = 0;
        loop {
            let attempt = tokio::select! {
                biased;
                _ = stop.cancelled() => return,
                r = lease.subscribe_releases(timing.call_timeout()) => r,
            };
            match attempt {
                Ok(mut stream) => {
                    failures = 0;
                    set_subscribed(&status, true);
                    // A release may have happened while we were not listening.
                    wake_tx.send_modify(|n| *n += 1);
                    debug!(channel = %lease.keys().channel, "subscribed to the release channel");
                    loop {
                        tokio::select! {
                            biased;
                            _ = stop.cancelled() => return,
                            msg = stream.next() => match msg {
                                Some(()) => wake_tx.send_modify(|n| *n += 1),
                                None => break,
                            },
                        }
                    }
                    set_subscribed(&status, false);
                    debug!(channel = %lease.keys().channel, "release channel closed; subscribing again");
                }
                Err(err) => {
                    failures = failures.saturating_add(1);
                    if failures == 1 {
                        warn!(error = %err, "cannot subscribe to the release channel; followers fall back to polling");
                    } else {
                        debug!(error = %err, failures, "still cannot subscribe to the release channel");
                    }
                }
            }
            let pause = backoff(&timing, failures);
            tokio::select! {
                biased;
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(pause) => {}
            }
        }
    });
    (Releases { wakeups }, task)
}

/// No release channel at all (the polling baseline): never wakes anyone, never subscribed.
pub(crate) fn none(stop: CancellationToken) -> (Releases, tokio::task::JoinHandle<()>) {
    let (wake_tx, wakeups) = watch::channel(0u64);
    // The sender lives as long as the task, so `next()` pends instead of returning.
    let task = tokio::spawn(async move {
        let _keep = wake_tx;
        stop.cancelled().await;
    });
    (Releases { wakeups }, task)
}

/// Pause before subscribing again: short after a clean close, growing to the lease duration.
fn backoff(timing: &Timing, failures: u32) -> Duration {
    let base = timing.retry_period / 4;
    base.saturating_mul(1 << failures.min(10))
        .min(timing.lease_duration)
}
