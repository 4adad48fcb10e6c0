//! The release channel: a task that keeps a pub/sub subscription to the lease's channel and
//! turns every release (and every re-subscription, after which a release may have been missed)
//! into a wake-up for the follower.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::Timing;
use crate::lease::RedisLease;

/// The follower's side of the release channel.
pub(crate) struct Releases {
    wakeups: watch::Receiver<u64>,
    subscribed: watch::Receiver<bool>,
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

    /// Whether a release would be heard right now.
    pub(crate) fn subscribed(&self) -> bool {
        *self.subscribed.borrow()
    }

    /// A receiver of the subscribed flag, for the status.
    pub(crate) fn subscribed_watch(&self) -> watch::Receiver<bool> {
        self.subscribed.clone()
    }
}

/// Starts the subscription task; it stops when `stop` is cancelled.
pub(crate) fn spawn(
    lease: Arc<RedisLease>,
    timing: Timing,
    stop: CancellationToken,
) -> (Releases, tokio::task::JoinHandle<()>) {
    let (wake_tx, wakeups) = watch::channel(0u64);
    let (sub_tx, subscribed) = watch::channel(false);
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
                    sub_tx.send_replace(true);
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
                    sub_tx.send_replace(false);
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
    (
        Releases {
            wakeups,
            subscribed,
        },
        task,
    )
}

/// No release channel at all (the polling baseline): never wakes anyone, never subscribed.
pub(crate) fn none(stop: CancellationToken) -> (Releases, tokio::task::JoinHandle<()>) {
    let (wake_tx, wakeups) = watch::channel(0u64);
    let (sub_tx, subscribed) = watch::channel(false);
    // The senders live as long as the task, so `next()` pends instead of returning.
    let task = tokio::spawn(async move {
        let _keep = (wake_tx, sub_tx);
        stop.cancelled().await;
    });
    (
        Releases {
            wakeups,
            subscribed,
        },
        task,
    )
}

/// Pause before subscribing again: short after a clean close, growing to the lease duration.
fn backoff(timing: &Timing, failures: u32) -> Duration {
    let base = timing.retry_period / 4;
    base.saturating_mul(1 << failures.min(10))
        .min(timing.lease_duration)
}
