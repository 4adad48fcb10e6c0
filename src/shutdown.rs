//! Shutdown: one root [`CancellationToken`] for the whole replica. The first SIGTERM or SIGINT
//! cancels it, and the replica drains (steps down, stops the command within its grace period,
//! releases the lease, exits); a second one exits at once, after the hooks registered for it
//! (killing the command, so that it does not outlive leasehold).

use std::sync::{Arc, Mutex, PoisonError};

use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

type Hook = Box<dyn Fn() + Send>;

/// The root token, and what to do before exiting at once.
#[derive(Clone, Default)]
pub struct Shutdown {
    token: CancellationToken,
    at_once: Arc<Mutex<Vec<Hook>>>,
}

impl Shutdown {
    /// A shutdown that only [`begin`](Self::begin) starts: for running a replica in-process.
    pub fn new() -> Self {
        Self::default()
    }

    /// A shutdown that SIGTERM and SIGINT start; a second signal exits the process at once
    /// with 128 + the signal's number. Needs a tokio runtime.
    pub fn on_signals() -> std::io::Result<Self> {
        let shutdown = Self::new();
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        let this = shutdown.clone();
        tokio::spawn(async move {
            let (first, _) = next(&mut term, &mut int).await;
            info!(
                signal = first,
                "shutting down: stepping down and releasing the lease"
            );
            this.begin();
            let (second, number) = next(&mut term, &mut int).await;
            warn!(
                signal = second,
                "second signal: exiting at once, without releasing the lease"
            );
            this.exit_at_once(128 + number);
        });
        Ok(shutdown)
    }

    /// Starts the drain: cancels the root token.
    pub fn begin(&self) {
        self.token.cancel();
    }

    /// The root token; tasks take child tokens of it.
    pub fn token(&self) -> CancellationToken {
        self.token.clone()
    }

    /// Runs `hook` before the process exits at once on a second signal.
    pub fn before_exit_at_once(&self, hook: impl Fn() + Send + 'static) {
        self.hooks().push(Box::new(hook));
    }

    fn hooks(&self) -> std::sync::MutexGuard<'_, Vec<Hook>> {
        self.at_once.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn exit_at_once(&self, code: i32) -> ! {
        for hook in self.hooks().iter() {
            hook();
        }
        std::process::exit(code)
    }
}

/// The next SIGTERM or SIGINT: its name and number.
async fn next(term: &mut Signal, int: &mut Signal) -> (&'static str, i32) {
    tokio::select! {
        _ = term.recv() => ("SIGTERM", nix::libc::SIGTERM),
        _ = int.recv() => ("SIGINT", nix::libc::SIGINT),
    }
}
