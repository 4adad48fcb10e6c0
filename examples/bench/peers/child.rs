//! leasehold's two contenders of the peer rounds, as modes of this harness re-run as a child:
//! the library (an elector whose work writes through its guard) and the command that
//! `leasehold run` starts in exec mode (it writes until SIGTERM). Both speak the drivers' line
//! protocol (see `python_lock.py`), so that every contender is measured the same way.

use std::convert::Infallible;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use leasehold::elector::{Elector, Leadership};
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

use super::{timing_for, wall_now};
use crate::electors::lease;

/// One protocol line: `EVENT WALL_CLOCK_NS`.
fn say(event: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{event} {}", wall_now().as_nanos());
    let _ = out.flush();
}

fn open_resource(path: &Path) -> Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("open the shared resource {}", path.display()))
}

/// One write to the shared resource: a line `IDENTITY WALL_CLOCK_NS`, appended in one
/// `write(2)` so that the file's order is the order the writes arrived in.
fn write_line(file: &mut File, identity: &str) -> Result<()> {
    let line = format!("{identity} {}\n", wall_now().as_nanos());
    file.write_all(line.as_bytes())
        .context("write to the shared resource")
}

/// The library contender: leads `name` with a lease of `ttl`, writes every millisecond right
/// after `Leadership::check()` said yes, and on SIGTERM steps down and releases.
pub async fn library(
    url: &str,
    name: &str,
    ttl: Duration,
    identity: &str,
    resource: &Path,
) -> Result<()> {
    let lease = lease(url, name, identity)?;
    let elector = Elector::new(lease, timing_for(ttl)).context("peer timing")?;
    let shutdown = CancellationToken::new();
    let mut term = signal(SignalKind::terminate()).context("install the SIGTERM handler")?;
    let on_term = shutdown.clone();
    tokio::spawn(async move {
        term.recv().await;
        on_term.cancel();
    });
    let identity = identity.to_owned();
    let resource = resource.to_owned();
    let stopping = shutdown.clone();
    let work = move |leadership: Leadership| {
        say("acquired");
        let identity = identity.clone();
        let stopping = stopping.clone();
        let opened = open_resource(&resource);
        async move {
            let Ok(mut file) = opened else {
                say("lost");
                return Ok(());
            };
            loop {
                tokio::select! {
                    biased;
                    _ = leadership.lost() => break,
                    _ = tokio::time::sleep(Duration::from_millis(1)) => {}
                }
                if leadership.check().is_err() {
                    break;
                }
                if write_line(&mut file, &identity).is_err() {
                    break;
                }
            }
            // The elector releases right after the work returns.
            say(if stopping.is_cancelled() {
                "released"
            } else {
                "lost"
            });
            Ok::<(), Infallible>(())
        }
    };
    say("waiting");
    elector.run(shutdown, work).await;
    Ok(())
}

/// The exec-mode command: it leads from the moment `leasehold run` starts it, writes every
/// millisecond, and stops at SIGTERM.
pub async fn writer(identity: &str, resource: &Path) -> Result<()> {
    let mut term = signal(SignalKind::terminate()).context("install the SIGTERM handler")?;
    say("acquired");
    let mut file = open_resource(resource)?;
    loop {
        tokio::select! {
            biased;
            _ = term.recv() => break,
            _ = tokio::time::sleep(Duration::from_millis(1)) => {}
        }
        write_line(&mut file, identity)?;
    }
    say("released");
    Ok(())
}
