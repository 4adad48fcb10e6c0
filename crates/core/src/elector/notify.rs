//! The release channel: a task that keeps a pub/sub subscription to the lease's channel, proves
//! it alive, subscribes again when it went silent or closed, and turns every release (and every
//! re-subscription, after which a release may have been missed) into a wake-up for the follower.
//!
//! Why prove it: a link that loses its peer silently (a blackhole, a node gone without a reset)
//! leaves a subscription that looks fine and hears nothing, and every graceful handoff would then
//! wait for the holder's TTL. TCP keepalive would not do: it proves only the nearest TCP peer (a
//! sidecar proxy or a load balancer in between answers for a dead Redis), and not that Redis
//! still serves this connection. A leader sends no probe: what it hears only makes sooner what
//! its renewals find anyway.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::future::OptionFuture;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::board::{StatusBoard, set};
use super::decide::{self, Keepalive, Wakeup};
use super::{Gates, Status, Timing};
use crate::lease::{Heard, LeaseError, RedisLease, ReleaseSubscription};

/// A wake-up and the instant it is due (a release waits out this follower's herd delay).
struct Pending {
    wakeup: Wakeup,
    due: Instant,
}

/// Wake-ups the follower has not looked at yet. Beyond this many, new ones are dropped: the
/// follower has not looked since, and its next try reads the lease's state anyway.
const QUEUED: usize = 8;

/// The numbers of this replica's probes, shared by the follower that sends them and the task
/// that hears them.
struct Probes {
    next: AtomicU64,
    /// The first number the current subscription can hear; [`NOT_HEARD`] while no subscription
    /// hears probes (none, or one whose probe channel an ACL refused).
    heard_from: AtomicU64,
}

/// [`Probes::heard_from`] while probes would not be heard.
const NOT_HEARD: u64 = u64::MAX;

impl Probes {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            next: AtomicU64::new(0),
            heard_from: AtomicU64::new(NOT_HEARD),
        })
    }
}

/// The follower's side of the release channel. Whether it is subscribed lives in the
/// elector's status (`redis.subscribed`), its one place.
pub(crate) struct Releases {
    wakeups: mpsc::Receiver<Pending>,
    nudges: watch::Receiver<u64>,
    probes: Arc<Probes>,
    /// The number of the last probe whose try Redis answered.
    answered: watch::Sender<u64>,
}

impl Releases {
    /// A number for the next try to publish as its probe, while the subscription hears probes.
    pub(crate) fn probe(&self) -> Option<u64> {
        (self.probes.heard_from.load(Ordering::SeqCst) != NOT_HEARD)
            .then(|| self.probes.next.fetch_add(1, Ordering::SeqCst))
    }

    /// Tells the subscription that Redis answered the try that published probe `n`: unless the
    /// subscription hears it soon, its link is dead.
    pub(crate) fn answered(&self, n: u64) {
        self.answered.send_replace(n);
    }

    /// Counts the handover nudges heard on the channel: a leader that sees it change renews at
    /// once, and its renewal reads the request itself. The nudge only makes that sooner; a
    /// request is never taken from the channel, which a blackholed link would lose.
    pub(crate) fn handover_nudges(&self) -> watch::Receiver<u64> {
        self.nudges.clone()
    }

    /// Marks every wake-up so far as seen. Call before a try, so that a release that lands
    /// during the try still wakes the sleep after it.
    pub(crate) fn mark_seen(&mut self) {
        while self.wakeups.try_recv().is_ok() {}
    }

    /// Resolves at the next wake-up not yet seen; a release only once its herd delay has
    /// passed. Dropped during that delay (another branch of the caller's `select!` won), the
    /// wake-up is spent: the caller is awake and about to try anyway.
    pub(crate) async fn next(&mut self) -> Wakeup {
        match self.wakeups.recv().await {
            Some(Pending { wakeup, due }) => {
                if due > Instant::now() {
                    tokio::time::sleep_until(due).await;
                }
                wakeup
            }
            // The task ended (shutdown): never resolve, the caller's other branches decide.
            None => std::future::pending().await,
        }
    }
}

/// Queues a wake-up due after `delay`; see [`QUEUED`] for a full queue.
fn wake(wakeups: &mpsc::Sender<Pending>, wakeup: Wakeup, delay: Duration) {
    let _ = wakeups.try_send(Pending {
        wakeup,
        due: Instant::now() + delay,
    });
}

/// Waits until this replica is in the election (`true`: no gate keeps it out and it does not sit
/// out) or out of it (`false`).
async fn until_in(want: bool, gates: &mut Gates, seen: &mut watch::Receiver<Status>) {
    loop {
        let stands = gates.standing().stands();
        let sits_out = seen.borrow_and_update().sitting_out.is_some();
        if (stands && !sits_out) == want {
            return;
        }
        // Only a change of the sit-out: the status changes at every renewal too.
        let changed = seen.wait_for(|s| s.sitting_out.is_some() != sits_out);
        tokio::select! {
            _ = gates.wait_until(|s| s.stands() != stands) => {}
            closed = async { changed.await.is_err() } => if closed { std::future::pending::<()>().await },
        }
    }
}

/// Starts the subscription task; it stops when `stop` is cancelled.
pub(crate) fn spawn(
    lease: Arc<RedisLease>,
    timing: Timing,
    status: StatusBoard,
    mut gates: Gates,
    stop: CancellationToken,
) -> (Releases, tokio::task::JoinHandle<()>) {
    let (wake_tx, wakeups) = mpsc::channel(QUEUED);
    let (nudge_tx, nudges) = watch::channel(0u64);
    let (answered, mut answers) = watch::channel(0u64);
    let probes = Probes::new();
    let heard = probes.clone();
    let task = tokio::spawn(async move {
        let channel = lease.keys().channel.clone();
        let mut failures: u32 = 0;
        let mut ping_refused = false;
        let mut seen = status.subscribe();
        let mut rejoining = false;
        loop {
            tokio::select! {
                biased;
                _ = stop.cancelled() => return,
                () = until_in(true, &mut gates, &mut seen) => {}
            }
            let attempt = tokio::select! {
                biased;
                _ = stop.cancelled() => return,
                r = lease.subscribe_releases(timing.call_timeout()) => r,
            };
            let rejoined = std::mem::take(&mut rejoining);
            match attempt {
                Ok(mut subscription) => {
                    failures = 0;
                    status.modify_if(|s| set(&mut s.redis.subscribed, true));
                    let wakeup = if rejoined {
                        Wakeup::Rejoined
                    } else {
                        Wakeup::Resubscribed
                    };
                    wake(&wake_tx, wakeup, Duration::ZERO);
                    debug!(%channel, "subscribed to the release channel");
                    let ended = listen(
                        &mut subscription,
                        decide::keepalive(&timing),
                        Channels {
                            owner: lease.owner().as_str(),
                            wakeups: &wake_tx,
                            nudges: &nudge_tx,
                            probes: &heard,
                            answers: &mut answers,
                        },
                        &stop,
                        until_in(false, &mut gates, &mut seen),
                        &mut ping_refused,
                    )
                    .await;
                    heard.heard_from.store(NOT_HEARD, Ordering::SeqCst);
                    status.modify_if(|s| set(&mut s.redis.subscribed, false));
                    match ended {
                        Ended::Stopped => return,
                        Ended::Out => {
                            debug!(%channel, "out of the election: not listening on the release channel");
                            rejoining = true;
                            continue;
                        }
                        Ended::Closed => {
                            debug!(%channel, "release channel closed; subscribing again")
                        }
                        Ended::Silent(err) => {
                            warn!(%channel, error = %err, "release channel went silent (a probe or PING not heard back); subscribing again")
                        }
                    }
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
            let pause = decide::resubscribe_backoff(&timing, failures);
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
            nudges,
            probes,
            answered,
        },
        task,
    )
}

/// Why a subscription ended.
enum Ended {
    /// Shutdown.
    Stopped,
    /// The replica is out of the election.
    Out,
    /// The connection closed (Redis closed it, or it was reset).
    Closed,
    /// A probe was not heard, or a `PING` got no answer, in time: the link is dead without
    /// having said so.
    Silent(LeaseError),
}

/// What a subscription feeds, and the answers to the follower's probes.
struct Channels<'a> {
    /// This process's owner id: its own releases wake nobody here.
    owner: &'a str,
    wakeups: &'a mpsc::Sender<Pending>,
    nudges: &'a watch::Sender<u64>,
    probes: &'a Probes,
    answers: &'a mut watch::Receiver<u64>,
}

/// Reads what `subscription` hears until it ends. With the probe channel, each try that Redis
/// answered must have its probe heard within `keepalive.timeout`; without it, a `PING` goes out
/// whenever the subscription has been quiet for `keepalive.idle`. Any answer proves the link, a
/// refused `PING` too (an ACL without `+ping`: said once, then taken as an answer).
async fn listen(
    subscription: &mut ReleaseSubscription,
    keepalive: Keepalive,
    channels: Channels<'_>,
    stop: &CancellationToken,
    out: impl Future<Output = ()>,
    ping_refused: &mut bool,
) -> Ended {
    let Channels {
        owner,
        wakeups,
        nudges,
        probes,
        answers,
    } = channels;
    let probing = subscription.probes();
    // Only the tries from now on can be heard here; an answer that came before is not ours.
    let heard_from = probes.next.load(Ordering::SeqCst);
    answers.borrow_and_update();
    if probing {
        probes.heard_from.store(heard_from, Ordering::SeqCst);
    }
    let mut heard_probe: Option<u64> = None;
    // The probe whose try was answered and which is not heard yet, and until when it may be.
    let mut awaited: Option<(u64, Instant)> = None;
    let mut heard = Instant::now();
    let mut ping = None;
    tokio::pin!(out);
    loop {
        let due = awaited.map(|(_, until)| until);
        tokio::select! {
            biased;
            _ = stop.cancelled() => return Ended::Stopped,
            () = &mut out => return Ended::Out,
            message = subscription.next() => match message {
                Some(Heard::Probe(n)) => {
                    heard = Instant::now();
                    heard_probe = heard_probe.max(Some(n));
                    if awaited.is_some_and(|(probe, _)| n >= probe) {
                        awaited = None;
                    }
                }
                Some(Heard::Release(release)) if release.nudged_term().is_some() => {
                    heard = Instant::now();
                    nudges.send_modify(|n| *n = n.wrapping_add(1));
                }
                // A leader renews at once and finds its lease gone; a follower tries at once.
                Some(Heard::Release(release)) if release.tells_data_loss() => {
                    heard = Instant::now();
                    nudges.send_modify(|n| *n = n.wrapping_add(1));
                    wake(wakeups, Wakeup::DataLoss, Duration::ZERO);
                }
                // Its own release (a win `WAIT` did not confirm, given back) tells it nothing.
                Some(Heard::Release(release)) if decide::own_release(&release.term, owner) => {
                    heard = Instant::now();
                }
                Some(Heard::Release(release)) => {
                    heard = Instant::now();
                    let delay = decide::herd_delay(release.subscribers, rand::random());
                    wake(wakeups, Wakeup::Released(release.term), delay);
                }
                None => return Ended::Closed,
            },
            Ok(()) = answers.changed(), if probing => {
                let n = *answers.borrow_and_update();
                let missing = n >= heard_from && heard_probe.is_none_or(|h| h < n);
                if missing && awaited.is_none() {
                    awaited = Some((n, Instant::now() + keepalive.timeout));
                }
            }
            _ = tokio::time::sleep_until(due.unwrap_or_else(Instant::now)), if due.is_some() => {
                return Ended::Silent(LeaseError::Timeout {
                    op: "probe",
                    after: keepalive.timeout,
                });
            }
            Some(answer) = OptionFuture::from(ping.as_mut()), if ping.is_some() => {
                ping = None;
                match answer {
                    Ok(()) => heard = Instant::now(),
                    // A refusal is an answer too: the link works.
                    Err(err) if LeaseError::is_answer(&err) => {
                        heard = Instant::now();
                        if matches!(err, LeaseError::NoPermission { .. }) && !*ping_refused {
                            *ping_refused = true;
                            warn!(error = %err, "redis refuses PING on the release channel; add +ping to the ACL user (it still proves the link)");
                        }
                    }
                    Err(err) => return Ended::Silent(err),
                }
            }
            _ = tokio::time::sleep_until(heard + keepalive.idle), if !probing && ping.is_none() => {
                ping = Some(Box::pin(subscription.ping(keepalive.timeout)));
            }
        }
    }
}

/// No release channel at all (the polling baseline): never wakes anyone, never subscribed.
pub(crate) fn none(stop: CancellationToken) -> (Releases, tokio::task::JoinHandle<()>) {
    let (wake_tx, wakeups) = mpsc::channel(1);
    let (nudge_tx, nudges) = watch::channel(0u64);
    let (answered, _) = watch::channel(0u64);
    // The senders live as long as the task, so `next()` pends instead of returning.
    let task = tokio::spawn(async move {
        let _keep = (wake_tx, nudge_tx);
        stop.cancelled().await;
    });
    (
        Releases {
            wakeups,
            nudges,
            probes: Probes::new(),
            answered,
        },
        task,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[tokio::test]
    async fn a_release_wakes_after_its_herd_delay_and_a_seen_one_not_at_all() {
        let (tx, wakeups) = mpsc::channel(QUEUED);
        let (_nudge_tx, nudges) = watch::channel(0u64);
        let (answered, _) = watch::channel(0u64);
        let mut releases = Releases {
            wakeups,
            nudges,
            probes: Probes::new(),
            answered,
        };
        wake(&tx, Wakeup::Released("a#1".into()), ms(20));
        let started = Instant::now();
        assert_eq!(releases.next().await, Wakeup::Released("a#1".into()));
        assert!(started.elapsed() >= ms(20), "{:?}", started.elapsed());
        // Seen before a try: gone.
        wake(&tx, Wakeup::Resubscribed, Duration::ZERO);
        releases.mark_seen();
        wake(&tx, Wakeup::Released("b#2".into()), Duration::ZERO);
        assert_eq!(releases.next().await, Wakeup::Released("b#2".into()));
        // A full queue drops the newest; the follower still wakes on the oldest.
        for i in 0..QUEUED + 3 {
            wake(&tx, Wakeup::Released(format!("c#{i}")), Duration::ZERO);
        }
        assert_eq!(releases.next().await, Wakeup::Released("c#0".into()));
        releases.mark_seen();
        assert!(releases.wakeups.try_recv().is_err());
    }
}
