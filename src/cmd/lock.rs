//! `leasehold lock -- CMD`: a one-shot lock for Jobs and CronJobs. Acquire the lease within
//! `--wait` (one try by default), run the command once under the same supervision as `leasehold
//! run` (token in its environment, the guard file, the watchdog renewing, every descendant
//! stopped no later than the validity deadline), release, and exit with the command's code.
//! Not acquired in time: [`NOT_ACQUIRED`] and one log line naming the holder (or the gate that
//! kept it out). Lost while the command ran (the command is stopped first): [`LOST`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tracing::{info, warn};

use super::contender::Contender;
use super::lease::{Workload, connect, name_lease, publisher};
use crate::board::Shown;
use crate::cli::{CliError, LockSettings};
use crate::clock::BootInstant;
use crate::elector::{Role, Standing, StepDownReason, TermHooks};
use crate::exec::ExecSettings;
use crate::k8s::Publisher;
use crate::lease::{CooldownState, FencingToken, LeaseName};
use crate::shutdown::Shutdown;

/// Exit code when the lock was not acquired within `--wait` (EX_TEMPFAIL: try again later).
pub const NOT_ACQUIRED: i32 = 75;
/// Exit code when the lock was lost while the command ran; the command was stopped.
pub const LOST: i32 = 76;
/// Exit code when the lock was not acquired and Redis did not answer, or refused, to the end,
/// and named no holder while it waited: nothing says that the lock is held elsewhere.
pub const REDIS_FAILED: i32 = 1;
/// How long after the contender's end the lock waits to read what ended its loop.
const AT_STOP: Duration = Duration::from_millis(100);

/// leasehold's exit code after a lock: `led` whether the lock was ever held, `reason` why its
/// term ended, `command` the command's own exit code when it ended on its own, `signalled`
/// 128 + the number of the signal that stopped leasehold, if one did
/// ([`Shutdown::signalled`]).
pub fn exit_code(
    led: bool,
    reason: Option<StepDownReason>,
    command: Option<i32>,
    signalled: Option<i32>,
) -> i32 {
    use StepDownReason::*;
    let stopped = signalled.unwrap_or(128 + nix::libc::SIGTERM);
    match (led, command, reason) {
        (false, ..) => signalled.unwrap_or(NOT_ACQUIRED),
        // It ended on its own, its work done: a term that ended while leasehold stopped what it
        // left running ended in cleanup.
        (true, Some(code), _) => code,
        (true, None, Some(WorkEnded | WorkFailed | WorkPanicked) | None) => 1,
        (true, None, Some(Shutdown)) => stopped,
        (
            true,
            None,
            Some(
                Lost
                | RenewDeadlinePassed
                | RenewRefused
                | ValidityDeadlinePassed
                | Pause
                | ClockStep
                | Gate(_)
                | Handover,
            ),
        ) => LOST,
    }
}

/// Takes the lock, runs the command once, releases; returns the process exit code.
pub async fn lock(settings: LockSettings, shutdown: Shutdown) -> Result<i32, CliError> {
    let LockSettings {
        contender: common,
        wait,
    } = settings;
    let client = connect(common.kube.mode).await?;
    let (lease_name, _) = name_lease(&common.lease, client.as_ref(), Workload::Job).await?;
    // The Kubernetes parts only when one is on: with all of them off, a lock reads only its pod
    // and its Job (for the name).
    let kube = &common.kube;
    let parts_on = kube.leader_label.is_some() || kube.lease_mirror || kube.events;
    let publisher = publisher(client.filter(|_| parts_on), &common, &lease_name, None)?
        .map(Publisher::without_handover_annotation);
    let mut contender = Contender::new(&common, &lease_name, publisher, &shutdown)?;
    let released = Arc::new(Released::default());
    contender.elector =
        (contender.elector.stop_when_work_ends().for_one_term(wait)).with_hooks(released.clone());
    // The elector's status as shown, with what reads heard of Redis while a gate kept it out.
    let shown = contender.board.subscribe();
    let mut gates_now = contender.elector.gates();
    // What ended the loop, read as it ends: a signal during the teardown after it, or a gate
    // that changes then, came too late to matter.
    let at_stop = {
        let (mut status, mut gates) = (shown.clone(), gates_now.clone());
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let _ = status.wait_for(|s| s.role == Role::Stopped).await;
            (shutdown.signalled(), gates.standing())
        })
    };
    // The first other holder named while the lock waited.
    let held_elsewhere = {
        let mut status = shown.clone();
        let named = |s: &Shown| s.status.leader_identity().is_some();
        tokio::spawn(async move {
            let seen = status.wait_for(named).await.ok()?;
            seen.status.leader_identity().map(str::to_owned)
        })
    };
    let lease = contender.elector.lease().clone();
    info!(
        identity = %common.identity,
        lease = %lease_name,
        redis = %common.redis.target.redacted_url(),
        wait_ms = wait.as_millis() as u64,
        command = common.exec.as_ref().map(ExecSettings::shown).unwrap_or_default(),
        "leasehold lock starting"
    );
    // Counted through pauses: a lock frozen past its wait says so by how long it waited.
    let started = BootInstant::now();
    // A configuration known to be unsafe ends the lock too, with exit code 2.
    let command = contender.run(shutdown.token()).await.command_code()?;
    // Stopped by now, unless the elector outlived the shutdown's bound: then read them now.
    let (signalled, standing) = match tokio::time::timeout(AT_STOP, at_stop).await {
        Ok(Ok(read)) => read,
        _ => (shutdown.signalled(), gates_now.standing()),
    };
    let seen = shown.borrow().clone();
    let led = seen.transitions > 0;
    let reason = seen.last_step_down.as_ref().map(|s| s.reason);
    let mut code = exit_code(led, reason, command, signalled);
    if led {
        let by_signal = reason == Some(StepDownReason::Shutdown) && command.is_none();
        let released = released.0.load(Ordering::Relaxed);
        report_term(&lease_name, reason, code, by_signal, released);
    } else if signalled.is_some() {
        info!(lease = %lease_name, code, "lock stopped by a signal before it was acquired");
    } else {
        // Who holds it now, for the one line that says why the command did not run.
        let now = lease.observe(common.timing.call_timeout()).await;
        let named = match held_elsewhere.is_finished() {
            true => held_elsewhere.await.ok().flatten(),
            false => None,
        };
        // What Redis failed or refused last: the tries (a missing permission, out of memory, a
        // replica, whether or not a read still answers), else this read.
        let read_failed = now.as_ref().err().map(ToString::to_string);
        let redis_error = seen.redis.last_error.clone().or(read_failed);
        let now = now.ok();
        let holder = now.as_ref().and_then(|o| o.holder.as_ref());
        // Nobody holds the lock, and Redis is why it was not taken: a failure.
        if redis_error.is_some() && named.is_none() && holder.is_none() {
            code = REDIS_FAILED;
        }
        let cooldown_ms = match now.as_ref().map(|o| o.cooldown) {
            Some(CooldownState::Running(left)) => Some(left.as_millis() as u64),
            _ => None,
        };
        // A gate that kept the lock out of the election (it never got to try) names itself.
        let (kept_out_by, kept_out) = match standing {
            Standing::Out { gate, detail } => (gate.label, detail.unwrap_or_default()),
            Standing::Stands => ("", String::new()),
        };
        warn!(
            lease = %lease_name,
            // Who holds it now, else who held it while the lock waited (also when that read failed).
            holder = holder.map(|h| h.identity()).or(named.as_deref()).unwrap_or(""),
            reserved_for = now.as_ref().and_then(|o| o.reserved.as_ref()).map_or("", |(who, _)| who),
            token = holder.and_then(|h| h.token).map(|t| t.0),
            cooldown_ms,
            redis_error = redis_error.as_deref().unwrap_or(""),
            kept_out_by,
            kept_out,
            waited_ms = BootInstant::now().saturating_duration_since(started).as_millis() as u64,
            code,
            "lock not acquired within --wait"
        );
    }
    Ok(code)
}

/// The one log line of how a term of the lock ended (`by_signal`: the code is 128 + the number of
/// the signal that stopped leasehold, the command having none of its own).
fn report_term(
    lease: &LeaseName,
    reason: Option<StepDownReason>,
    code: i32,
    by_signal: bool,
    released: bool,
) {
    let reason = reason.map(StepDownReason::as_label).unwrap_or_default();
    if code == LOST {
        warn!(%lease, reason, code, "lock lost while the command ran; the command was stopped");
    } else if !released {
        warn!(%lease, reason, code, "lock not released (the lease expires on its own); exiting with the command's exit code, or 128 + the number of the signal that stopped leasehold");
    } else if by_signal {
        info!(%lease, code, "lock released; exiting with 128 + the number of the signal that stopped leasehold");
    } else {
        info!(%lease, code, "lock released; exiting with the command's exit code");
    }
}

/// Whether the lock's term ended with its lease released, as the elector tells its hooks.
#[derive(Default)]
struct Released(AtomicBool);

impl TermHooks for Released {
    fn ended(&self, _token: FencingToken, _reason: StepDownReason, released: bool) {
        self.0.store(released, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use StepDownReason::*;

    #[test]
    fn exit_code_table() {
        // (led, reason, command's code, 128 + the signal's number) -> exit code
        let cases = [
            (false, None, None, None, NOT_ACQUIRED),
            (false, None, None, Some(130), 130),
            (true, Some(WorkEnded), Some(0), None, 0),
            (true, Some(WorkEnded), Some(7), None, 7),
            (true, Some(WorkFailed), None, None, 1),
            (true, Some(Lost), None, None, LOST),
            (true, Some(Lost), Some(0), None, 0),
            (true, Some(Handover), Some(3), None, 3),
            (true, Some(RenewDeadlinePassed), None, None, LOST),
            (true, Some(ValidityDeadlinePassed), None, None, LOST),
            (true, Some(Handover), None, None, LOST),
            (true, Some(Shutdown), None, Some(129), 129),
            (true, Some(Shutdown), None, None, 143),
            (true, Some(Shutdown), Some(0), Some(143), 0),
        ];
        for (led, reason, command, signalled, want) in cases {
            assert_eq!(
                exit_code(led, reason, command, signalled),
                want,
                "{led} {reason:?} {command:?} {signalled:?}"
            );
        }
    }
}
