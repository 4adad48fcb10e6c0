//! Gray faults (docs/DESIGN.md, "Gray failures"): one replica partly sick for several lease
//! durations (its requests or its replies slow, its replies reset, its ACL user without `+pexpire`,
//! its leasehold held to a CPU quota), and partway through a healthy leader leaves, as in a rolling
//! update, so that the lease becomes free with the sick replica among the contenders.

use std::time::Duration;

use anyhow::Context;

use crate::nemesis::{FaultRecord, Impairment, Nemesis, sleep_ms};
use crate::redis_cli::RedisCli;
use crate::schedule::{FaultSpec, Target};
use crate::starve::Starving;
use crate::time;
use leasehold::lease::minimal_acl_rule;
use testbed::proxy::Fault;

/// The ACL user of a replica that lacks one permission, and its password.
const USER: (&str, &str) = ("chaos-no-pexpire", "chaos-no-pexpire-pw");

/// What ails the sick replica.
#[derive(Debug, Clone, Copy)]
pub enum Sickness {
    /// Its link does this to the bytes.
    Link(Fault, Impairment),
    /// It connects as an ACL user without `+pexpire`: renewals, and so acquires, are refused.
    NoPermission,
    /// Its leasehold gets this share of a core, in percent.
    Starved(u64),
}

/// How the sick replica is made well again.
enum Cure {
    /// Its link passes again.
    Link,
    /// It is restarted as the default user.
    Permission,
    /// It gets its CPU back.
    Cpu(Starving),
}

impl Nemesis<'_> {
    /// Injects a gray fault of the schedule.
    pub(crate) fn inject_gray(
        &mut self,
        fault: &FaultSpec,
        record: &mut FaultRecord,
    ) -> anyhow::Result<()> {
        let delayed = |d: u64, fault: fn(Duration) -> Fault| fault(Duration::from_millis(d));
        let (target, sickness, hold_ms, leave_after_ms) = match *fault {
            FaultSpec::GraySlowRequests {
                target,
                delay_ms,
                hold_ms,
                leave_after_ms,
            } => {
                let link = delayed(delay_ms, Fault::DelayRequests);
                let sick = Sickness::Link(link, Impairment::SlowRequests);
                (target, sick, hold_ms, leave_after_ms)
            }
            FaultSpec::GraySlowReplies {
                target,
                delay_ms,
                hold_ms,
                leave_after_ms,
            } => {
                let link = delayed(delay_ms, Fault::DelayReplies);
                let sick = Sickness::Link(link, Impairment::SlowReplies);
                (target, sick, hold_ms, leave_after_ms)
            }
            FaultSpec::GrayResetReplies {
                target,
                hold_ms,
                leave_after_ms,
            } => {
                let sick = Sickness::Link(Fault::ResetReplies, Impairment::ResetReplies);
                (target, sick, hold_ms, leave_after_ms)
            }
            FaultSpec::GrayNoPermission {
                target,
                hold_ms,
                leave_after_ms,
            } => (target, Sickness::NoPermission, hold_ms, leave_after_ms),
            FaultSpec::GrayStarved {
                target,
                quota_pct,
                hold_ms,
                leave_after_ms,
            } => (
                target,
                Sickness::Starved(quota_pct),
                hold_ms,
                leave_after_ms,
            ),
            _ => anyhow::bail!("not a gray fault: {fault:?}"),
        };
        self.gray(record, target, sickness, hold_ms, leave_after_ms)
    }

    /// Makes the replica `target` names sick for `hold_ms`; `leave_after_ms` into that, the
    /// leader (if it is another replica) is SIGTERMed and started again.
    pub(crate) fn gray(
        &mut self,
        record: &mut FaultRecord,
        target: Target,
        sickness: Sickness,
        hold_ms: u64,
        leave_after_ms: u64,
    ) -> anyhow::Result<()> {
        let Some(i) = self.aim(record, target, "no leader to make sick") else {
            return Ok(());
        };
        record.inject = time::now();
        let (cure, how) = self.make_sick(i, sickness)?;
        let sick_from = time::now();
        let until = record.inject + ms(hold_ms);
        sleep_ms(leave_after_ms);
        // The lease becomes free while the sick replica contends: a healthy leader leaves.
        let left = match self.system.leader() {
            Some((l, _)) if l != i => {
                self.terminate_and_start(l)?;
                format!("r{l} (leading) SIGTERMed {leave_after_ms} ms in")
            }
            Some(_) => "the sick replica led when the leader was to leave".to_owned(),
            None => "nobody led when the leader was to leave".to_owned(),
        };
        let rest = until - time::now();
        if rest > 0 {
            std::thread::sleep(Duration::from_micros(rest.unsigned_abs()));
        }
        let what = match sickness {
            Sickness::Link(_, what) => what,
            Sickness::NoPermission => Impairment::NoPermission,
            Sickness::Starved(_) => Impairment::Starved,
        };
        self.span(Some(i), sick_from, time::now(), what);
        self.make_well(i, cure)?;
        record.clear = time::now();
        record.detail = Some(format!("r{i}: {how}; {left}"));
        Ok(())
    }

    fn make_sick(&mut self, i: usize, sickness: Sickness) -> anyhow::Result<(Cure, String)> {
        match sickness {
            Sickness::Link(fault, what) => {
                self.system.replicas[i].proxy.set(fault);
                let how = match fault {
                    Fault::DelayRequests(d) | Fault::DelayReplies(d) => {
                        format!("{} {} ms", what.label(), d.as_millis())
                    }
                    _ => what.label().to_owned(),
                };
                Ok((Cure::Link, how))
            }
            Sickness::NoPermission => {
                // docs/REFERENCE.md's rule without `+pexpire`: renewals are refused, and so acquires.
                let rule = minimal_acl_rule("leasehold:", false).replace(" +pexpire", "");
                let password = format!(">{}", USER.1);
                let mut args = vec!["ACL", "SETUSER", USER.0, "reset"];
                args.extend(rule.split(' '));
                args.push(&password);
                self.system
                    .redis
                    .cli(0, &args)
                    .context("cannot create the ACL user without +pexpire")?;
                self.system.replicas[i].set_user(Some((USER.0.to_owned(), USER.1.to_owned())));
                self.terminate_and_start(i)?;
                Ok((
                    Cure::Permission,
                    format!("restarted as ACL user {} (no +pexpire)", USER.0),
                ))
            }
            Sickness::Starved(pct) => {
                let pid = self.system.replicas[i]
                    .pid()
                    .context("the replica to starve is not running")?;
                let (starving, how) = Starving::begin(i, pid, pct)?;
                Ok((Cure::Cpu(starving), how))
            }
        }
    }

    fn make_well(&mut self, i: usize, cure: Cure) -> anyhow::Result<()> {
        match cure {
            Cure::Link => self.system.replicas[i].proxy.set(Fault::Pass),
            Cure::Permission => {
                self.system.replicas[i].set_user(None);
                self.terminate_and_start(i)?;
            }
            Cure::Cpu(starving) => starving.end(),
        }
        Ok(())
    }
}

fn ms(ms: u64) -> time::Micros {
    i64::try_from(ms).unwrap_or(i64::MAX / 1_000) * time::MS
}
