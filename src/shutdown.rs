//! Shutdown: one root [`CancellationToken`] for the whole replica. The first SIGTERM, SIGINT or
//! SIGHUP cancels it, and the replica drains (steps down, stops the command within its grace
//! period, releases the lease, exits); a second one exits at once, after the hooks registered
//! for it (killing the command, so that it does not outlive leasehold). SIGHUP is handled like
//! SIGTERM because its default action kills the process without a release: a closed terminal,
//! or a supervisor that hangs up, would leave the successor waiting out the lease's TTL.
//! SIGTSTP (Ctrl-Z) is ignored: the command runs in its own process group, and would go on.

use std::sync::{Arc, Mutex, OnceLock};

use leasehold_core::locked::locked;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

type Hook = Box<dyn Fn() + Send>;

/// The root token, and what to do before exiting at once.
#[derive(Clone, Default)]
pub struct Shutdown {
    token: CancellationToken,
    at_once: Arc<Mutex<Vec<Hook>>>,
    /// The number of the signal that started the drain, if one did.
    signal: Arc<OnceLock<i32>>,
}

impl Shutdown {
    /// A shutdown that SIGTERM, SIGINT and SIGHUP start; a second signal exits the process at
    /// once with 128 + the signal's number. Needs a tokio runtime.
    pub fn on_signals() -> std::io::Result<Self> {
        let shutdown = Self::default();
        let mut signals = Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
        };
        let mut suspend = signal(SignalKind::from_raw(nix::libc::SIGTSTP))?;
        tokio::spawn(async move {
            while suspend.recv().await.is_some() {
                warn!(
                    "ignored SIGTSTP: stopped alone, leasehold would let its command run on past the lease; stop it with SIGTERM or SIGINT"
                );
            }
        });
        let this = shutdown.clone();
        tokio::spawn(async move {
            let (first, number) = signals.next().await;
            info!(
                signal = first,
                "shutting down: stepping down and releasing the lease"
            );
            let _ = this.signal.set(number);
            this.token.cancel();
            let (second, number) = signals.next().await;
            warn!(
                signal = second,
                "second signal: exiting at once, without waiting for the lease's release"
            );
            this.exit_at_once(128 + number);
        });
        Ok(shutdown)
    }

    /// 128 + the number of the signal that started the drain (SIGTERM's for a drain begun
    /// without one), once it began: the exit code of a process that a signal ended.
    pub fn signalled(&self) -> Option<i32> {
        let number = self.signal.get().copied().unwrap_or(nix::libc::SIGTERM);
        self.token.is_cancelled().then_some(128 + number)
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
        locked(&self.at_once)
    }

    fn exit_at_once(&self, code: i32) -> ! {
        for hook in self.hooks().iter() {
            hook();
        }
        #[cfg(feature = "cli")]
        crate::telemetry::flush();
        std::process::exit(code)
    }
}

/// The signals that shut leasehold down.
struct Signals {
    term: Signal,
    int: Signal,
    hup: Signal,
}

impl Signals {
    /// The next SIGTERM, SIGINT or SIGHUP: its name and number.
    async fn next(&mut self) -> (&'static str, i32) {
        tokio::select! {
            _ = self.term.recv() => ("SIGTERM", nix::libc::SIGTERM),
            _ = self.int.recv() => ("SIGINT", nix::libc::SIGINT),
            _ = self.hup.recv() => ("SIGHUP", nix::libc::SIGHUP),
        }
    }
}
