//! A minimal leasehold contender: joins the election for a lease and, while leading, acts every
//! 20 ms through the guard, printing one line per event on stdout. The test suite runs it as a
//! real child process to SIGKILL and SIGSTOP a leader; it is also the shortest complete example
//! of the library.
//!
//! ```text
//! cargo run --example contender -- redis://127.0.0.1:6380 default/demo pod-a [LEASE_MS RENEW_MS RETRY_MS] [--no-cooldown]
//! ```
//!
//! Lines: `leader token=T`, `action token=T`, `refused token=T error=…`,
//! `stepped_down token=T reason=R`, `following leader=ID`.

use std::io::Write;
use std::time::Duration;

use leasehold::elector::{Elector, Leadership, Role, Timing};
use leasehold::lease::{LeaseName, LeaseOptions, OwnerId, RedisLease};
use tokio_util::sync::CancellationToken;

fn say(line: String) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

async fn work(leadership: Leadership) -> Result<(), std::convert::Infallible> {
    let token = leadership.token();
    say(format!("leader token={token}"));
    loop {
        match leadership.check() {
            Ok(token) => say(format!("action token={token}")),
            Err(err) => {
                say(format!("refused token={token} error={err}"));
                leadership.lost().await;
                return Ok(());
            }
        }
        tokio::select! {
            _ = leadership.lost() => return Ok(()),
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_ansi(std::env::var_os("NO_COLOR").is_none())
        .with_writer(std::io::stderr)
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let no_cooldown = args.iter().any(|a| a == "--no-cooldown");
    let positional: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let [url, lease, identity, rest @ ..] = positional.as_slice() else {
        return Err("usage: contender REDIS_URL LEASE IDENTITY [LEASE_MS RENEW_MS RETRY_MS] [--no-cooldown]".into());
    };
    let mut timing = Timing::default();
    if let [lease_ms, renew_ms, retry_ms] = rest {
        timing.lease_duration = Duration::from_millis(lease_ms.parse()?);
        timing.renew_deadline = Duration::from_millis(renew_ms.parse()?);
        timing.retry_period = Duration::from_millis(retry_ms.parse()?);
    }
    let options = LeaseOptions {
        cooldown_on_data_loss: !no_cooldown,
        ..LeaseOptions::default()
    };
    let lease = RedisLease::new(
        url,
        LeaseName::new(lease.as_str())?,
        OwnerId::generate(identity)?,
        options,
    )?;
    say(format!("owner={}", lease.owner()));
    let elector = Elector::new(lease, timing)?;

    let mut status = elector.status();
    tokio::spawn(async move {
        let mut last_steps = 0;
        let mut last_leader = None;
        while status.changed().await.is_ok() {
            let s = status.borrow_and_update().clone();
            if let Some(step) = &s.last_step_down
                && s.transitions != last_steps
                && !matches!(s.role, Role::Leader { .. })
            {
                say(format!(
                    "stepped_down token={} reason={}",
                    step.token,
                    step.reason.as_label()
                ));
            }
            last_steps = s.transitions;
            if let Role::Follower {
                leader: Some(l), ..
            } = &s.role
                && last_leader.as_ref() != Some(&l.owner)
            {
                say(format!("following leader={}", l.identity));
                last_leader = Some(l.owner.clone());
            }
        }
    });

    let shutdown = CancellationToken::new();
    let on_signal = shutdown.clone();
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::spawn(async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = sigterm.recv() => {}
        }
        on_signal.cancel();
    });
    elector.run(shutdown, work).await;
    say("stopped".to_owned());
    Ok(())
}
