//! The guard file as a subscriber of the elector's term hooks: published when a term begins
//! and at each renewal, zeroed first thing when it ends.
//!
//! Every write runs on a thread of the file's own. A filesystem that stops answering (a hung
//! network or FUSE volume) holds up that thread alone, never the runtime's workers, where the
//! renewals, the probes and the command's deadline kill run. A hook waits for its write only
//! where the order matters (the term's publication before the work starts, its withdrawal
//! before the release), and then at most [`WRITE_BOUND`]. A write asked for while another is
//! under way replaces any still waiting: a hung file keeps one write, however many renewals.
//!
//! A write the filesystem refuses (full, read-only) is another matter: the command's checks
//! refuse for as long as it lasts. With a guard file the user named (`--guard-file`), which says
//! the command reads it, the leader leads for nothing: it steps down and stays out
//! ([`GUARD_FILE`], a [`TermBackoff`]) so that a healthy replica leads, and tries again with a
//! term after a pause. The default file may be read by nobody, and a replica leads on. Said at
//! warn once a streak, at debug after, at info once written again.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use leasehold_core::locked::locked;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use super::GuardFile;
use crate::clock::{BootInstant, WallLead};
use crate::elector::{Standing, StepDownReason, TermHooks, Timing};
use crate::gates::{GUARD_FILE, TermBackoff};
use crate::lease::{FencingToken, LeaseName};
use crate::owned_file::WRITE_BOUND;

/// What the file's thread is asked to do.
#[derive(Debug, Clone, Copy)]
enum Job {
    Publish(FencingToken, BootInstant, WallLead),
    Withdraw(FencingToken),
    End,
}

/// The jobs between the hooks and the file's thread.
#[derive(Default)]
struct Desk {
    /// The job waiting, if any, and the number of the last job asked for.
    next: Option<Job>,
    asked: u64,
    /// The number of the last job done (a job replaced counts as done with the one after it),
    /// and whether the file named no term after it.
    done: u64,
    cleared: bool,
    /// No job follows: the thread ends, and says so once it let go of the file (`ended`).
    closed: bool,
    ended: bool,
}

/// What a refused write does, shared by the hooks and the file's thread.
struct Refusals {
    /// Closed while the file cannot be written, when `steps_down`.
    gate: Arc<TermBackoff>,
    steps_down: bool,
    /// The term under way: a write for one that ended meanwhile closes nothing, since no term's
    /// end would open the gate again.
    current: Mutex<Option<FencingToken>>,
    /// A streak of refused writes is under way (said once), and the writes that succeeded since
    /// its last refusal: it ends at the second in a row, since on a full filesystem each refusal
    /// frees the page the withdrawn file held, and the next write succeeds.
    failing: AtomicBool,
    written: AtomicU32,
}

/// The hooks that keep `guard` in step with this replica's terms (`identity` names it in the
/// logs).
pub struct GuardHooks {
    path: PathBuf,
    lease: LeaseName,
    identity: String,
    desk: Arc<(Mutex<Desk>, Condvar)>,
    refusals: Arc<Refusals>,
}

impl GuardHooks {
    /// Hooks writing `guard` for the replica `identity` (at `timing`), on a thread started for
    /// it, and the standing they give ([`Elector::with_gate`](crate::elector::Elector::with_gate)):
    /// out while the file refuses writes, when it `steps_down` for that (a file the user named).
    pub fn new(
        guard: Arc<GuardFile>,
        identity: impl Into<String>,
        timing: Timing,
        steps_down: bool,
    ) -> std::io::Result<(Arc<Self>, watch::Receiver<Standing>)> {
        let desk = Arc::new((Mutex::new(Desk::default()), Condvar::new()));
        let identity: String = identity.into();
        let (path, lease) = (guard.path().to_owned(), guard.lease().clone());
        let (gate, standing) = TermBackoff::new(GUARD_FILE, timing);
        let refusals = Arc::new(Refusals {
            gate,
            steps_down,
            current: Mutex::new(None),
            failing: AtomicBool::new(false),
            written: AtomicU32::new(0),
        });
        let (jobs, writer, shared) = (desk.clone(), identity.clone(), refusals.clone());
        std::thread::Builder::new()
            .name("guard-file".into())
            .spawn(move || work(guard, &jobs, &writer, &shared))?;
        let hooks = Arc::new(Self {
            path,
            lease,
            identity,
            desk,
            refusals,
        });
        Ok((hooks, standing))
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Zeroes and removes the file and its lock file for a process about to exit
    /// ([`GuardFile::end_at_exit`]), waiting at most `within`: whether the file is gone.
    pub fn end_at_exit(&self, within: Duration) -> bool {
        self.wait(self.ask(Job::End), within) == Some(true)
    }

    /// Asks for `job`, in place of the one waiting, unless that is the end (which stays the
    /// last): its number.
    fn ask(&self, job: Job) -> u64 {
        let (desk, bell) = &*self.desk;
        let mut desk = locked(desk);
        if !matches!(desk.next, Some(Job::End)) {
            desk.next = Some(job);
            desk.asked += 1;
            bell.notify_all();
        }
        desk.asked
    }

    /// Waits at most `within` for job `number`: whether the file named no term after it, or
    /// `None` when it was not done in time. Off the runtime's worker, where there is one.
    fn wait(&self, number: u64, within: Duration) -> Option<bool> {
        let (desk, bell) = &*self.desk;
        let wait = || {
            let (desk, _) = bell
                .wait_timeout_while(locked(desk), within, |d| d.done < number)
                .unwrap_or_else(PoisonError::into_inner);
            (desk.done >= number).then_some(desk.cleared)
        };
        match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
            Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(wait),
            _ => wait(),
        }
    }
}

impl Drop for GuardHooks {
    /// Ends the thread, and waits at most [`WRITE_BOUND`] for it to let go of the file (removed
    /// and unclaimed when nothing else holds it).
    fn drop(&mut self) {
        let (desk, bell) = &*self.desk;
        let mut d = locked(desk);
        d.closed = true;
        bell.notify_all();
        let _ = bell.wait_timeout_while(d, WRITE_BOUND, |d| !d.ended);
    }
}

impl TermHooks for GuardHooks {
    fn began(&self, token: FencingToken, valid_until: BootInstant, lead: WallLead) {
        *locked(&self.refusals.current) = Some(token);
        let asked = self.ask(Job::Publish(token, valid_until, lead));
        if self.wait(asked, WRITE_BOUND).is_none() {
            warn!(
                identity = %self.identity,
                lease = %self.lease,
                token = token.0,
                path = %self.path.display(),
                bound_ms = WRITE_BOUND.as_millis() as u64,
                "the guard file was not written within its bound as the term began (its filesystem stopped answering, or the host is too starved to run the writer); the command's checks refuse until the term is written"
            );
        }
    }

    fn extended(&self, token: FencingToken, valid_until: BootInstant, lead: WallLead) {
        // Not waited for: until it is written, the file names an earlier deadline of the term.
        self.ask(Job::Publish(token, valid_until, lead));
    }

    fn ending(&self, token: FencingToken, _reason: StepDownReason) -> bool {
        *locked(&self.refusals.current) = None;
        let cleared = self.wait(self.ask(Job::Withdraw(token)), WRITE_BOUND);
        if cleared.is_none() {
            warn!(
                identity = %self.identity,
                lease = %self.lease,
                token = token.0,
                path = %self.path.display(),
                bound_ms = WRITE_BOUND.as_millis() as u64,
                "the guard file was not zeroed within its bound at step-down (its filesystem stopped answering, or the host is too starved to run the writer); it may name the term until its deadline"
            );
        }
        cleared == Some(true)
    }

    fn ended(&self, _token: FencingToken, _reason: StepDownReason, _released: bool) {
        (self.refusals.gate).term_ended(|| info!("contending again to write the guard file"));
    }
}

/// The file's thread: does the jobs in the order asked, the last waiting one only, until the
/// hooks are dropped.
fn work(guard: Arc<GuardFile>, desk: &(Mutex<Desk>, Condvar), identity: &str, refusals: &Refusals) {
    let (desk, bell) = desk;
    loop {
        let (job, number) = {
            let mut d = bell
                .wait_while(locked(desk), |d| d.next.is_none() && !d.closed)
                .unwrap_or_else(PoisonError::into_inner);
            match d.next.take() {
                Some(job) => (job, d.asked),
                None => break,
            }
        };
        let cleared = match job {
            Job::Publish(token, valid_until, lead) => {
                publish(&guard, identity, refusals, token, valid_until, lead)
            }
            Job::Withdraw(token) => withdraw(&guard, identity, token),
            Job::End => guard.end_at_exit(),
        };
        let mut d = locked(desk);
        (d.done, d.cleared) = (number, cleared);
        bell.notify_all();
    }
    drop(guard);
    locked(desk).ended = true;
    bell.notify_all();
}

/// Publishes the term; when it cannot, withdraws what the file holds, which may be an earlier
/// deadline of the term, later than the one this renewal measured, and closes the gate when
/// the replica steps down for that and the term is still under way. Whether the file names no
/// term after it.
fn publish(
    guard: &GuardFile,
    identity: &str,
    refusals: &Refusals,
    token: FencingToken,
    valid_until: BootInstant,
    lead: WallLead,
) -> bool {
    let Err(err) = guard.publish(token, valid_until, lead) else {
        refusals.gate.clear();
        let written = refusals
            .written
            .fetch_add(1, Ordering::Relaxed)
            .saturating_add(1);
        if written >= 2 && refusals.failing.swap(false, Ordering::Relaxed) {
            info!(%identity, lease = %guard.lease(), token = token.0, "the guard file is written again");
        }
        return false;
    };
    let withdrawn = zero_or_remove(guard).is_none_or(|(_, removed)| removed);
    refusals.written.store(0, Ordering::Relaxed);
    let stepping_down = refusals.steps_down && {
        // Held while the gate closes: a term's end waits for it, and then opens it again.
        let current = locked(&refusals.current);
        *current == Some(token)
            && (refusals.gate)
                .close(|pause| {
                    format!(
                        "cannot write the guard file {}: {err}; contending again in {} ms",
                        guard.path().display(),
                        pause.as_millis()
                    )
                })
                .is_some()
    };
    if !refusals.failing.swap(true, Ordering::Relaxed) {
        warn!(
            %identity,
            lease = %guard.lease(),
            token = token.0,
            path = %guard.path().display(),
            error = %err,
            withdrawn,
            stepping_down,
            "could not publish the term in the guard file; the command's checks refuse until it is written"
        );
    } else {
        debug!(
            %identity,
            token = token.0,
            error = %err,
            withdrawn,
            stepping_down,
            "could not publish the term in the guard file again"
        );
    }
    withdrawn
}

/// Withdraws the term at step-down: whether the file names no term after it.
fn withdraw(guard: &GuardFile, identity: &str, token: FencingToken) -> bool {
    let Some((err, removed)) = zero_or_remove(guard) else {
        return true;
    };
    warn!(
        %identity,
        lease = %guard.lease(),
        token = token.0,
        path = %guard.path().display(),
        error = %err,
        removed,
        "could not zero the guard file; removed it instead (unless removed = false: then it holds the term until its deadline)"
    );
    removed
}

/// Zeroes the file, else removes it: `None` when zeroed, else why not and whether it is gone.
fn zero_or_remove(guard: &GuardFile) -> Option<(std::io::Error, bool)> {
    let err = guard.revoke().err()?;
    Some((err, guard.remove()))
}
