//! In-process electors for the benchmarks: each with its own Redis connection (and, unless it
//! polls, its own pub/sub connection), reporting on a channel the boot-clock instant its work
//! received a `Leadership` and the instant that work ended.

use std::convert::Infallible;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use leasehold::clock::BootInstant;
use leasehold::elector::decide::FollowerStrategy;
use leasehold::elector::{Elector, Leadership, Role, Status, Timing};
use leasehold::lease::{LeaseName, LeaseOptions, OwnerId, RedisLease};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// What an elector's work reports.
#[derive(Debug, Clone)]
pub enum Event {
    /// The work was handed its `Leadership` (read synchronously, as the elector called it).
    Led { owner: String, at: BootInstant },
    /// The term ended and the work is returning: the elector releases the lease next.
    Ended { owner: String, at: BootInstant },
}

/// A lease on `url` for `identity`, without the data-loss cooldown: every benchmark starts on a
/// fresh redis-server, where the cooldown would only delay the first election by one TTL.
pub fn lease(url: &str, name: &str, identity: &str) -> Result<RedisLease> {
    let options = LeaseOptions {
        cooldown_on_data_loss: false,
        ..LeaseOptions::default()
    };
    RedisLease::new(
        url,
        LeaseName::new(name).with_context(|| format!("lease name {name}"))?,
        OwnerId::generate(identity).with_context(|| format!("identity {identity}"))?,
        options,
    )
    .with_context(|| format!("a lease on {url}"))
}

/// One elector running on the harness's runtime. Dropping it asks it to shut down (step down
/// and release if it leads).
pub struct Member {
    pub owner: String,
    pub status: watch::Receiver<Status>,
    shutdown: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl Member {
    /// Starts an elector for lease `name` that reports its terms on `events`.
    pub fn spawn(
        url: &str,
        name: &str,
        identity: &str,
        timing: Timing,
        strategy: FollowerStrategy,
        events: mpsc::UnboundedSender<Event>,
    ) -> Result<Self> {
        let lease = lease(url, name, identity)?;
        let owner = lease.owner().to_string();
        let elector = Elector::new(lease, timing)
            .context("bench timing")?
            .with_follower_strategy(strategy);
        let status = elector.status();
        let shutdown = CancellationToken::new();
        let work_owner = owner.clone();
        let work = move |leadership: Leadership| {
            let at = BootInstant::now();
            let owner = work_owner.clone();
            let _ = events.send(Event::Led {
                owner: owner.clone(),
                at,
            });
            let events = events.clone();
            async move {
                leadership.lost().await;
                let _ = events.send(Event::Ended {
                    owner,
                    at: BootInstant::now(),
                });
                Ok::<(), Infallible>(())
            }
        };
        let task = tokio::spawn(elector.run(shutdown.clone(), work));
        Ok(Self {
            owner,
            status,
            shutdown,
            task: Some(task),
        })
    }

    /// Asks the elector to shut down (a leader steps down and releases).
    pub fn stop(&self) {
        self.shutdown.cancel();
    }

    /// Shuts down and waits until the elector has stopped.
    pub async fn finish(mut self, within: Duration) -> Result<()> {
        self.stop();
        if let Some(task) = self.task.take() {
            tokio::time::timeout(within, task)
                .await
                .context("an elector did not stop in time")?
                .context("an elector task failed")?;
        }
        Ok(())
    }

    /// Waits until this elector follows `leader` (any leader when `None`), subscribed to the
    /// release channel when `subscribed`.
    pub async fn await_following(
        &mut self,
        leader: Option<&str>,
        subscribed: bool,
        within: Duration,
    ) -> Result<()> {
        let what = format!("{} to follow {}", self.owner, leader.unwrap_or("a leader"));
        wait_status(&mut self.status, &what, within, |s| {
            let follows = match (&s.role, leader) {
                (
                    Role::Follower {
                        leader: Some(l), ..
                    },
                    Some(want),
                ) => l.owner == want,
                (
                    Role::Follower {
                        leader: Some(_), ..
                    },
                    None,
                ) => true,
                _ => false,
            };
            follows && (!subscribed || s.redis.subscribed)
        })
        .await
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Waits until the watched status satisfies `pred`.
pub async fn wait_status(
    rx: &mut watch::Receiver<Status>,
    what: &str,
    within: Duration,
    pred: impl FnMut(&Status) -> bool,
) -> Result<()> {
    match tokio::time::timeout(within, rx.wait_for(pred)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(_)) => bail!("the elector stopped while waiting for {what}"),
        Err(_) => bail!("timed out after {within:?} waiting for {what}"),
    }
}

/// Receives events until one matches `pick`, within `within`.
pub async fn next_event<T>(
    rx: &mut mpsc::UnboundedReceiver<Event>,
    what: &str,
    within: Duration,
    mut pick: impl FnMut(&Event) -> Option<T>,
) -> Result<T> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(event)) => {
                if let Some(v) = pick(&event) {
                    return Ok(v);
                }
            }
            Ok(None) => bail!("the event channel closed while waiting for {what}"),
            Err(_) => bail!("timed out after {within:?} waiting for {what}"),
        }
    }
}

/// A `Led` event's instant for an owner other than `not`.
pub fn led_by_other(not: &str) -> impl FnMut(&Event) -> Option<(String, BootInstant)> + '_ {
    move |e| match e {
        Event::Led { owner, at } if owner != not => Some((owner.clone(), *at)),
        _ => None,
    }
}

/// The instant `later` is after `earlier` (zero when it is not).
pub fn since(later: BootInstant, earlier: BootInstant) -> Duration {
    later.saturating_duration_since(earlier)
}
