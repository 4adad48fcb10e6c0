//! Exec mode frozen past its deadline: a `leasehold run` leader whose command is a shell with a
//! worker ([`handoff::EXEC_COMMAND`]) is SIGSTOPped (leasehold alone: its command runs on, as
//! it would under a frozen leasehold) for the lease duration and more, then resumed. Measured:
//! SIGCONT → every process of the command gone, each seen through a pidfd (readable once the
//! process has exited), so that nothing polls.

use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use leasehold::clock::BootInstant;
use leasehold::elector::Timing;
use nix::sys::signal::Signal;
use testbed::Guarded;
use tokio::io::unix::AsyncFd;

use crate::handoff::EXEC_COMMAND;
use crate::pause::Wave;
use crate::procs::{self, Events};

/// One frozen exec-mode leader.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// SIGCONT → the last process of the command exited.
    pub resume_to_gone: Duration,
}

/// A pidfd of `pid` (`pidfd_open(2)`): readable once the process has exited.
fn pidfd(pid: i32) -> Result<AsyncFd<OwnedFd>> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new file descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error()).context("pidfd_open");
    }
    // SAFETY: the descriptor was just returned to us and nothing else owns it.
    let owned = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    // SAFETY: an OwnedFd keeps its descriptor open, and the same, until the AsyncFd drops it.
    unsafe { AsyncFd::register(owned) }.map_err(|e| anyhow::anyhow!("register a pidfd: {e}"))
}

/// The pids of `sh`'s children, once it has one (the worker starts at once).
async fn worker_of(sh: i32, within: Duration) -> Result<Vec<i32>> {
    let until = std::time::Instant::now() + within;
    loop {
        let text = std::fs::read_to_string(format!("/proc/{sh}/task/{sh}/children"))
            .context("read the shell's children")?;
        let pids: Vec<i32> = text
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        if !pids.is_empty() {
            return Ok(pids);
        }
        if std::time::Instant::now() >= until {
            bail!("the command's shell started no worker within {within:?}");
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// One wave of exec-mode leaders, each on its own lease.
pub async fn wave(bin: &Path, url: &str, timing: Timing, wave: Wave) -> Result<Vec<Sample>> {
    let wait = Duration::from_secs(15);
    let mut leaders = Vec::new();
    for i in 0..wave.count {
        let lease = format!("bench/exec-pause-{}-{i}", wave.number);
        let identity = format!("exec-pause-{}-{i}", wave.number);
        let leader = procs::start(bin, url, &lease, &identity, &timing, &EXEC_COMMAND).await?;
        leader
            .wait_event(0, "started the command", None, wait)
            .await?;
        let sh = leader
            .process
            .stderr
            .find_from(0, |line| {
                let v: serde_json::Value = serde_json::from_str(line).ok()?;
                (v["message"] == "started the command").then(|| v["pid"].as_i64())?
            })
            .context("the command's pid")? as i32;
        let mut fds = vec![pidfd(sh)?];
        for pid in worker_of(sh, wait).await? {
            fds.push(pidfd(pid)?);
        }
        leaders.push((leader, fds));
    }
    // Let the leaders renew a few times.
    tokio::time::sleep(timing.retry_period * 2).await;
    let processes: Vec<&Guarded> = leaders.iter().map(|(leader, _)| &leader.process).collect();
    wave.freeze(timing, &processes).await?;
    // Every pidfd waited on at once, from before the first resume, each noting the instant its
    // process was seen gone: a wait that started after the resumes would note the instant it
    // started instead.
    let gone = futures_util::future::join_all(leaders.iter().flat_map(|(_, fds)| {
        fds.iter().map(|fd| async move {
            let _exited = tokio::time::timeout(wait, fd.readable())
                .await
                .context("a process of the command still runs after the resume")?
                .context("wait on a pidfd")?;
            Ok::<_, anyhow::Error>(BootInstant::now())
        })
    }));
    let (gone, resumed) = tokio::join!(gone, wave.resume(&processes));
    let resumed = resumed?;
    let mut gone = gone.into_iter();
    let mut samples = Vec::new();
    for (i, (_, fds)) in leaders.iter().enumerate() {
        let mut last = resumed[i];
        for _ in fds {
            let at = gone.next().context("an instant per pidfd")??;
            last = last.max(at);
        }
        samples.push(Sample {
            resume_to_gone: last.saturating_duration_since(resumed[i]),
        });
    }
    for (mut leader, _) in leaders {
        leader.process.signal(Signal::SIGTERM)?;
        procs::wait_exit(&mut leader.process, wait).await?;
    }
    Ok(samples)
}
