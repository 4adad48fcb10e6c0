//! Shutdown: one root [`CancellationToken`] for the whole replica. The first signal whose
//! default action would end the process ([`DRAIN`]) cancels it, and the replica drains (steps
//! down, stops the command within its grace period, releases the lease, exits); a second one
//! exits at once, after the hooks registered for it (killing the command, so that it does not
//! outlive leasehold). Left to their default, such signals (a closed terminal's SIGHUP, Ctrl-\'s
//! SIGQUIT, a stray SIGUSR1) killed leasehold without a release: the successor waited out the
//! TTL, and the command's children ran on beside its command. The signals that would stop it
//! are ignored: the command runs in its own process group, and would go on.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use leasehold_core::locked::locked;
use nix::sys::signal::{SigHandler, Signal as NixSignal};
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
    /// The exit code, once a second signal began exiting at once.
    at_once_code: Arc<OnceLock<i32>>,
}

impl Shutdown {
    /// A shutdown that any of [`DRAIN`] starts; a second signal, later than [`SAME_SIGNAL`],
    /// exits the process at once with 128 + the signal's number. Needs a tokio runtime.
    pub fn on_signals() -> std::io::Result<Self> {
        let shutdown = Self::default();
        let mut signals = Signals(
            DRAIN
                .iter()
                .map(|&s| Ok((s, signal(SignalKind::from_raw(s as i32))?)))
                .collect::<std::io::Result<_>>()?,
        );
        // A handler would not do for these: a background write to the terminal would be refused
        // with the signal again and again. The command gets them back (`exec`'s pre_exec).
        for s in [NixSignal::SIGTTIN, NixSignal::SIGTTOU] {
            // SAFETY: ignoring a signal installs no handler; nothing else sets these two.
            unsafe { nix::sys::signal::signal(s, SigHandler::SigIgn) }
                .map_err(std::io::Error::from)?;
        }
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
            let first = signals.next().await;
            let at = std::time::Instant::now();
            info!(
                signal = first.as_str(),
                "shutting down: stepping down and releasing the lease"
            );
            let _ = this.signal.set(first as i32);
            this.token.cancel();
            let second = loop {
                let next = signals.next().await;
                if at.elapsed() > SAME_SIGNAL {
                    break next;
                }
            };
            warn!(
                signal = second.as_str(),
                "second signal: exiting at once, without waiting for the lease's release"
            );
            this.exit_at_once(128 + second as i32);
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
        locked(&self.at_once).push(Box::new(hook));
    }

    /// Returns at once, unless a second signal is exiting the process: then never, so that a
    /// drain its hooks ended meanwhile cannot exit first, with another code.
    pub async fn unless_exiting_at_once(&self) {
        if self.at_once_code.get().is_some() {
            std::future::pending::<()>().await;
        }
    }

    fn exit_at_once(&self, code: i32) -> ! {
        let _ = self.at_once_code.set(code);
        for hook in locked(&self.at_once).iter() {
            hook();
        }
        #[cfg(feature = "cli")]
        crate::telemetry::flush();
        std::process::exit(code)
    }
}

/// The signals that start the drain: every one whose default action ends the process, but for
/// SIGKILL (which cannot be caught) and those that say the process itself is at fault (SIGSEGV
/// and the like).
pub const DRAIN: [NixSignal; 13] = {
    use NixSignal::*;
    [
        SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF, SIGIO,
        SIGPWR, SIGXCPU, SIGXFSZ,
    ]
};

/// A signal this soon after the one that started the drain is the same request: GNU `timeout`
/// sends its signal to the process and again to its process group, microseconds apart.
pub const SAME_SIGNAL: Duration = Duration::from_millis(100);

/// The handlers of [`DRAIN`].
struct Signals(Vec<(NixSignal, Signal)>);

impl Signals {
    /// The next of them.
    async fn next(&mut self) -> NixSignal {
        let each = self.0.iter_mut().map(|(s, handler)| {
            Box::pin(async move {
                handler.recv().await;
                *s
            })
        });
        futures_util::future::select_all(each).await.0
    }
}
