//! Redis load: what N contenders of one lease cost their Redis, counted by the Redis itself.
//!
//! Each configuration (strategy × number of contenders) gets a dedicated redis-server, so
//! `INFO commandstats` deltas count its electors and nothing else. Commands that leasehold's Lua
//! scripts run inside Redis are counted there too; they are not commands a client sent, so they
//! are shown apart, and used to tell the leader's commands from the followers': a renewal runs
//! `PEXPIRE` inside its script, and nothing else an idle elector sends does. `INFO` is both:
//! every acquire script runs `INFO server` and `INFO replication` for the server's identity,
//! and every renewal's `INFO replication` for its role (nothing else an idle elector sends runs
//! `INFO` inside Redis), so two per try and one per renewal are counted inside, and the rest as
//! sent (the eviction check's `INFO memory`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use leasehold::clock::BootInstant;
use leasehold::elector::Timing;
use leasehold::elector::decide::FollowerStrategy;
use redis::aio::MultiplexedConnection;
use tokio::sync::mpsc;

use crate::electors::{Event, Member, led_by_other, next_event, since};
use testbed::RedisServer;
use testbed::redis_server::command_calls;

/// The scripts an idle elector runs: a follower's tries, the leader's renewals, a release.
const IDLE_SCRIPTS: [&str; 3] = ["acquire", "renew", "release"];

/// Commands the lease scripts call inside Redis (never sent by a leasehold client), as
/// `INFO commandstats` names them (`pubsub|numsub` for a subcommand), read once from the
/// scripts themselves so that a command a script starts to call is never counted as sent;
/// `INFO` apart (see the header).
static INSIDE_SCRIPTS: LazyLock<BTreeSet<String>> = LazyLock::new(|| {
    IDLE_SCRIPTS
        .iter()
        .flat_map(|op| leasehold::lease::script_calls(op))
        .map(|(_, command)| command)
        .filter(|command| !command.starts_with("info"))
        .collect()
});

/// `INFO` calls inside each acquire script: `INFO server` and `INFO replication`.
const INFO_PER_TRY: u64 = 2;
/// `INFO` calls inside each renewal's script: `INFO replication` (a replica is refused).
const INFO_PER_RENEWAL: u64 = 1;

/// One configuration.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    pub strategy: FollowerStrategy,
    pub contenders: usize,
}

/// What one configuration cost over the idle window, and one handoff.
#[derive(Debug, Clone)]
pub struct Row {
    pub config: Config,
    pub window: Duration,
    /// Commands the clients sent, by command.
    pub sent: BTreeMap<String, u64>,
    /// Commands the scripts ran inside Redis, by command.
    pub inside: BTreeMap<String, u64>,
    /// All commands the clients sent.
    pub total: u64,
    /// The leader's renewals.
    pub leader: u64,
    /// Redis's own CPU time (user + system) over the window.
    pub redis_cpu: Duration,
    pub transition: Option<Transition>,
}

impl Row {
    pub fn followers(&self) -> usize {
        self.config.contenders.saturating_sub(1)
    }

    /// Per second of one idle follower: `n` commands of all followers over the window.
    fn per_follower(&self, n: u64) -> Option<f64> {
        let followers = self.followers();
        (followers > 0).then(|| n as f64 / followers as f64 / self.window.as_secs_f64())
    }

    /// Commands per second of one idle follower, everything it sent counted: its tries, and
    /// the release channel's keepalive `PING`s and the eviction check's `INFO memory` where
    /// there are any. The leader's rare `INFO memory` is counted here too: it cannot be told
    /// from a follower's, so this errs high.
    pub fn per_follower_per_s(&self) -> Option<f64> {
        self.per_follower(self.total.saturating_sub(self.leader))
    }

    /// Per second of one idle follower, of one command it sent (`evalsha` counts its tries
    /// alone, the leader's renewals taken off).
    pub fn sent_per_follower_per_s(&self, cmd: &str) -> Option<f64> {
        let n = self.sent.get(cmd).copied().unwrap_or(0);
        let n = if cmd == "evalsha" {
            n.saturating_sub(self.leader)
        } else {
            n
        };
        self.per_follower(n)
    }

    /// The followers' tries: every `EVALSHA` but the leader's renewals.
    pub fn tries(&self) -> u64 {
        self.sent
            .get("evalsha")
            .copied()
            .unwrap_or(0)
            .saturating_sub(self.leader)
    }

    /// Commands the scripts ran inside Redis, of every elector.
    pub fn inside_total(&self) -> u64 {
        self.inside.values().sum()
    }

    /// Commands per second of the leader.
    pub fn leader_per_s(&self) -> f64 {
        self.leader as f64 / self.window.as_secs_f64()
    }

    pub fn total_per_s(&self) -> f64 {
        self.total as f64 / self.window.as_secs_f64()
    }
}

/// One graceful handoff under this configuration.
#[derive(Debug, Clone, Copy)]
pub struct Transition {
    /// Commands sent between the shutdown and the end of the settle time.
    pub raw: u64,
    /// Of those, the ones beyond what the idle rate predicts for that interval.
    pub excess: f64,
    /// From the shutdown request to the successor's `Leadership`.
    pub handoff: Duration,
}

/// A configuration's redis-server and electors.
pub struct Group {
    pub config: Config,
    redis: RedisServer,
    conn: MultiplexedConnection,
    leader: Member,
    followers: Vec<Member>,
    events: mpsc::UnboundedReceiver<Event>,
    timing: Timing,
}

/// Starts a redis-server and the contenders: the leader first, then the followers spread over
/// one lease duration so that their wake-ups are spread as in a long-running deployment.
pub async fn prepare(config: Config, timing: Timing) -> Result<Group> {
    let redis = tokio::task::block_in_place(|| RedisServer::builder().try_start())
        .context("start a redis-server for the load benchmark")?;
    let url = redis.url();
    let lease = "bench/load";
    let (tx, mut events) = mpsc::unbounded_channel();
    let id = |i: usize| format!("load-{i}");
    let leader = Member::spawn(&url, lease, &id(0), timing, config.strategy, tx.clone())?;
    let settle = timing.lease_duration * 2 + Duration::from_secs(10);
    let leader_owner = leader.owner.clone();
    next_event(&mut events, "the load leader", settle, |e| match e {
        Event::Led { owner, .. } if *owner == leader_owner => Some(()),
        _ => None,
    })
    .await?;
    let n = config.contenders.saturating_sub(1);
    let mut followers = Vec::with_capacity(n);
    for i in 1..=n {
        followers.push(Member::spawn(
            &url,
            lease,
            &id(i),
            timing,
            config.strategy,
            tx.clone(),
        )?);
        tokio::time::sleep(timing.lease_duration / n as u32).await;
    }
    let subscribed = config.strategy == FollowerStrategy::Notified;
    for f in followers.iter_mut() {
        f.await_following(Some(&leader_owner), subscribed, settle)
            .await?;
    }
    let client = redis::Client::open(url.as_str()).context("redis URL")?;
    let conn = client
        .get_multiplexed_async_connection()
        .await
        .context("connect to read INFO")?;
    Ok(Group {
        config,
        redis,
        conn,
        leader,
        followers,
        events,
        timing,
    })
}

/// Command calls and Redis CPU at one moment.
pub struct Snapshot {
    calls: BTreeMap<String, u64>,
    cpu: f64,
    at: Instant,
}

impl Group {
    pub async fn snapshot(&mut self) -> Result<Snapshot> {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .arg("cpu")
            .query_async(&mut self.conn)
            .await
            .context("INFO commandstats cpu")?;
        Ok(Snapshot {
            at: Instant::now(),
            cpu: ["used_cpu_sys", "used_cpu_user"]
                .iter()
                .filter_map(|k| info_field(&info, k))
                .sum(),
            calls: command_calls(&info),
        })
    }

    /// The row for the window between two snapshots.
    pub fn row(&self, before: &Snapshot, after: &Snapshot) -> Row {
        let delta = delta(before, after);
        let leader = delta.get("pexpire").copied().unwrap_or(0);
        let (sent, inside) = split_inside(delta, leader);
        Row {
            config: self.config,
            window: after.at - before.at,
            total: sent.values().sum(),
            sent,
            inside,
            leader,
            redis_cpu: Duration::from_secs_f64((after.cpu - before.cpu).max(0.0)),
            transition: None,
        }
    }

    /// Shuts the leader down and counts the commands until `settle` after the successor led;
    /// `idle_per_s` is the configuration's idle rate, subtracted for that interval.
    pub async fn transition(&mut self, idle_per_s: f64, settle: Duration) -> Result<Transition> {
        if self.followers.is_empty() {
            bail!("a transition needs a follower");
        }
        while self.events.try_recv().is_ok() {}
        let before = self.snapshot().await?;
        let old = self.leader.owner.clone();
        let asked = BootInstant::now();
        self.leader.stop();
        let within =
            self.timing.lease_duration + self.timing.retry_period * 3 + Duration::from_secs(10);
        let (new_owner, led) =
            next_event(&mut self.events, "a successor", within, led_by_other(&old)).await?;
        tokio::time::sleep(settle).await;
        let after = self.snapshot().await?;
        let delta = delta(&before, &after);
        let leader = delta.get("pexpire").copied().unwrap_or(0);
        let sent: u64 = split_inside(delta, leader).0.values().sum();
        let interval = (after.at - before.at).as_secs_f64();
        if let Some(pos) = self.followers.iter().position(|f| f.owner == new_owner) {
            let new_leader = self.followers.swap_remove(pos);
            let old_leader = std::mem::replace(&mut self.leader, new_leader);
            old_leader.finish(Duration::from_secs(10)).await?;
        }
        Ok(Transition {
            raw: sent,
            excess: (sent as f64 - idle_per_s * interval).max(0.0),
            handoff: since(led, asked),
        })
    }

    /// Stops every elector, then the redis-server.
    pub async fn finish(self) -> Result<()> {
        let Group {
            redis,
            leader,
            followers,
            ..
        } = self;
        leader.finish(Duration::from_secs(10)).await?;
        for f in followers {
            f.stop();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        drop(redis);
        Ok(())
    }
}

fn delta(before: &Snapshot, after: &Snapshot) -> BTreeMap<String, u64> {
    let mut d = BTreeMap::new();
    for (cmd, &n) in &after.calls {
        let was = before.calls.get(cmd).copied().unwrap_or(0);
        if n > was {
            d.insert(cmd.clone(), n - was);
        }
    }
    // The first snapshot's own INFO.
    if let Some(info) = d.get_mut("info") {
        *info -= 1;
    }
    d.retain(|_, n| *n > 0);
    d
}

/// What the clients sent and what the scripts ran inside Redis, from one delta in which the
/// leader renewed `renewals` times: every other `EVALSHA` is a try; each script's `INFO`
/// calls.
fn split_inside(
    delta: BTreeMap<String, u64>,
    renewals: u64,
) -> (BTreeMap<String, u64>, BTreeMap<String, u64>) {
    let (mut inside, mut sent): (BTreeMap<_, _>, BTreeMap<_, _>) = delta
        .into_iter()
        .partition(|(cmd, _)| INSIDE_SCRIPTS.contains(cmd));
    let tries = sent
        .get("evalsha")
        .copied()
        .unwrap_or(0)
        .saturating_sub(renewals);
    if let Some(info) = sent.get_mut("info") {
        let of_scripts = (tries * INFO_PER_TRY + renewals * INFO_PER_RENEWAL).min(*info);
        *info -= of_scripts;
        if of_scripts > 0 {
            inside.insert("info".to_owned(), of_scripts);
        }
    }
    sent.retain(|_, n| *n > 0);
    (sent, inside)
}

fn info_field(info: &str, key: &str) -> Option<f64> {
    info.lines()
        .find_map(|line| line.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scripts_own_calls_are_counted_inside_and_a_clients_commands_as_sent() {
        for command in ["get", "set", "pexpire", "publish", "time", "pubsub|numsub"] {
            assert!(
                INSIDE_SCRIPTS.contains(command),
                "{command} in {:?}",
                *INSIDE_SCRIPTS
            );
        }
        let delta = BTreeMap::from([
            ("evalsha".to_owned(), 5),
            ("pexpire".to_owned(), 2),
            ("pubsub|numsub".to_owned(), 2),
            ("info".to_owned(), 9),
            ("ping".to_owned(), 1),
        ]);
        // Two renewals, so three tries: their scripts ran eight of the nine INFO.
        let (sent, inside) = split_inside(delta, 2);
        assert_eq!(
            sent,
            BTreeMap::from([
                ("evalsha".to_owned(), 5),
                ("info".to_owned(), 1),
                ("ping".to_owned(), 1),
            ])
        );
        assert_eq!(inside["pubsub|numsub"], 2);
        assert_eq!(inside["info"], 8);
    }
}
