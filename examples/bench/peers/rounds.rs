//! The peer rounds on one shared Redis: per kind one lock and three contenders (a holder and
//! two waiting), and, round by round, each kind in turn: a graceful handoff (SIGTERM to the
//! holder), a crash failover (SIGKILL, measured from the key's expiry) and a pause (SIGSTOP for
//! twice the TTL, then SIGCONT), after each of which the group is filled up to three again.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use nix::sys::signal::Signal;

use super::contender::{Contender, Env, await_ready, first_to_acquire};
use super::{Kind, wall_now};

/// How long a fresh waiter has said `waiting` before it counts as waiting on the lock.
const SETTLE: Duration = Duration::from_millis(200);

/// One graceful handoff.
#[derive(Debug, Clone, Copy)]
pub struct Handoff {
    /// SIGTERM to the holder → the successor's `acquired`.
    pub from_sigterm: Duration,
    /// The holder's `released` (sent right before its release) → the successor's `acquired`.
    pub from_release: Duration,
}

/// One paused holder.
#[derive(Debug, Clone, Copy)]
pub struct Pause {
    /// Its writes that reached the resource after the successor's first write.
    pub stale_writes: u64,
    /// SIGCONT → its last write (zero when it wrote nothing after the resume).
    pub kept_writing: Duration,
    /// It was still writing when the observation ended.
    pub still_writing: bool,
}

impl Pause {
    /// From the resource's lines (writer, instant) since the freeze: `old` the paused holder,
    /// `new` its successor, watched until `until`.
    fn of(
        lines: &[(String, Duration)],
        old: &str,
        new: &str,
        resumed: Duration,
        until: Duration,
    ) -> Self {
        let first_new = lines.iter().position(|(who, _)| who == new);
        let stale = first_new.map_or(0, |f| {
            lines[f..].iter().filter(|(who, _)| who == old).count()
        });
        let last_old = lines
            .iter()
            .rev()
            .find(|(who, _)| who == old)
            .map(|(_, at)| *at);
        Self {
            stale_writes: stale as u64,
            kept_writing: last_old.map_or(Duration::ZERO, |at| at.saturating_sub(resumed)),
            still_writing: last_old.is_some_and(|at| until.saturating_sub(at) < STILL_WRITING),
        }
    }
}

/// A resumed holder whose last write is this close to the end of the watch still writes.
const STILL_WRITING: Duration = Duration::from_millis(50);

/// One kind's lock and contenders.
pub struct Group {
    pub kind: Kind,
    url: String,
    name: String,
    resource: PathBuf,
    holder: Contender,
    waiting: Vec<Contender>,
    started: usize,
}

impl Group {
    /// The first holder, once it holds, and two waiting contenders.
    pub async fn start(
        env: &Env,
        kind: Kind,
        url: &str,
        tag: &str,
        dir: &std::path::Path,
    ) -> Result<Self> {
        let name = format!("bench-peers-{tag}-{}", kind.slug());
        let resource = dir.join(format!("{name}.log"));
        let _ = std::fs::remove_file(&resource);
        let holder =
            Contender::start(env, kind, url, &name, &format!("{name}-0"), &resource).await?;
        holder
            .wait_event("acquired", env.ttl * 3 + Duration::from_secs(15))
            .await?;
        let mut group = Self {
            kind,
            url: url.to_owned(),
            name,
            resource,
            holder,
            waiting: Vec::new(),
            started: 1,
        };
        group.fill(env).await?;
        Ok(group)
    }

    /// Starts waiting contenders until there are two.
    async fn fill(&mut self, env: &Env) -> Result<()> {
        while self.waiting.len() < 2 {
            let identity = format!("{}-{}", self.name, self.started);
            self.started += 1;
            let c = Contender::start(
                env,
                self.kind,
                &self.url,
                &self.name,
                &identity,
                &self.resource,
            )
            .await?;
            self.waiting.push(c);
        }
        Ok(())
    }

    pub async fn ready(&self, within: Duration) -> Result<()> {
        await_ready(&self.waiting, SETTLE, within)
            .await
            .with_context(|| self.kind.label())
    }

    /// Makes waiter `i` the holder (the old holder is dropped: killed and reaped) and fills up.
    pub async fn promote(&mut self, env: &Env, i: usize) -> Result<()> {
        self.holder = self.waiting.remove(i);
        self.fill(env).await
    }

    fn within(env: &Env) -> Duration {
        env.ttl * 3 + Duration::from_secs(10)
    }

    /// One graceful handoff: SIGTERM to the holder, which releases; a waiter takes over.
    pub async fn handoff(&mut self, env: &Env) -> Result<Handoff> {
        self.ready(Self::within(env)).await?;
        let sent = wall_now();
        self.holder.signal(Signal::SIGTERM)?;
        let (i, acquired) = first_to_acquire(&self.waiting, Self::within(env))
            .await
            .with_context(|| format!("{}: handoff", self.kind.label()))?;
        let released = self
            .holder
            .wait_event("released", Self::within(env))
            .await?;
        self.holder.wait_exit(Self::within(env)).await?;
        self.promote(env, i).await?;
        Ok(Handoff {
            from_sigterm: acquired.saturating_sub(sent),
            from_release: acquired.saturating_sub(released),
        })
    }

    /// SIGKILLs the holder; the key's expiry, from a `PTTL` sent right after (the instant
    /// taken before it was sent, the earliest the expiry can be).
    pub async fn crash(
        &mut self,
        env: &Env,
        conn: &mut redis::aio::MultiplexedConnection,
    ) -> Result<Duration> {
        self.ready(Self::within(env)).await?;
        self.holder.signal(Signal::SIGKILL)?;
        let sent = wall_now();
        let pttl: i64 = redis::cmd("PTTL")
            .arg(self.kind.key(&self.name))
            .query_async(conn)
            .await
            .context("PTTL of a killed holder's lock")?;
        if pttl < 0 {
            bail!(
                "{}: the lock had no TTL right after its holder was killed ({pttl})",
                self.kind.label()
            );
        }
        Ok(sent + Duration::from_millis(pttl as u64))
    }

    /// After [`crash`](Self::crash): the successor (to [`promote`](Self::promote)) and its
    /// `acquired` minus the expiry.
    pub async fn after_crash(&self, env: &Env, expiry: Duration) -> Result<(usize, Duration)> {
        let (i, acquired) = first_to_acquire(&self.waiting, Self::within(env))
            .await
            .with_context(|| format!("{}: crash failover", self.kind.label()))?;
        Ok((i, acquired.saturating_sub(expiry)))
    }

    /// Lines of the resource so far.
    fn resource_lines(&self) -> Vec<(String, Duration)> {
        std::fs::read_to_string(&self.resource)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let (who, ns) = l.split_once(' ')?;
                Some((who.to_owned(), Duration::from_nanos(ns.parse().ok()?)))
            })
            .collect()
    }

    /// SIGSTOPs the holder; the resource's length then.
    pub async fn freeze(&mut self, env: &Env) -> Result<usize> {
        self.ready(Self::within(env)).await?;
        let from = self.resource_lines().len();
        self.holder.signal(Signal::SIGSTOP)?;
        Ok(from)
    }

    /// SIGCONTs the holder; the instant.
    pub fn resume(&mut self) -> Result<Duration> {
        let at = wall_now();
        self.holder.signal(Signal::SIGCONT)?;
        Ok(at)
    }

    /// After [`resume`](Self::resume) and some time to watch: the successor (to
    /// [`promote`](Self::promote)) and what reached the resource from line `from` on.
    pub async fn after_pause(
        &self,
        env: &Env,
        from: usize,
        resumed: Duration,
    ) -> Result<(usize, Pause)> {
        let (i, _) = first_to_acquire(&self.waiting, Self::within(env))
            .await
            .with_context(|| format!("{}: pause", self.kind.label()))?;
        let lines = self.resource_lines();
        let lines = lines.get(from..).unwrap_or_default();
        let pause = Pause::of(
            lines,
            &self.holder.identity,
            &self.waiting[i].identity,
            resumed,
            wall_now(),
        );
        Ok((i, pause))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(rows: &[(&str, u64)]) -> Vec<(String, Duration)> {
        rows.iter()
            .map(|(who, ms)| (who.to_string(), Duration::from_millis(*ms)))
            .collect()
    }

    #[test]
    fn a_pause_counts_the_old_holders_writes_after_the_successors_first() {
        let ms = Duration::from_millis;
        // (lines, resumed, until) → (stale, kept writing, still writing)
        let cases = [
            // Stopped cleanly: nothing after the resume.
            (
                lines(&[("a", 1), ("a", 2), ("b", 10), ("b", 11)]),
                9,
                100,
                (0, 0, false),
            ),
            // One write landed after the successor's first, 2 ms after the resume.
            (
                lines(&[("a", 1), ("b", 10), ("a", 11), ("b", 12)]),
                9,
                100,
                (1, 2, false),
            ),
            // Never stopped.
            (
                lines(&[("a", 1), ("b", 10), ("a", 60), ("a", 99)]),
                9,
                100,
                (2, 90, true),
            ),
            // The successor never wrote: nothing is stale yet.
            (lines(&[("a", 1), ("a", 20)]), 9, 100, (0, 11, false)),
        ];
        for (rows, resumed, until, (stale, kept, still)) in cases {
            let p = Pause::of(&rows, "a", "b", ms(resumed), ms(until));
            assert_eq!(
                (p.stale_writes, p.kept_writing, p.still_writing),
                (stale, ms(kept), still),
                "{rows:?}"
            );
        }
    }
}
