//! Faults of the leader's work: a command that leaves a daemon or a SIGTERM-proof worker behind
//! when its term ends, and work that fails at once, again and again; and the two ways the
//! nemesis ends a term.

use std::time::{Duration, Instant};

use crate::nemesis::{FaultRecord, Impairment, Nemesis, Span, sleep_ms};
use crate::schedule::{Target, TermEnd};
use crate::time;
use testbed::proxy::Fault;

impl Nemesis<'_> {
    /// Orders the leader's command to start a helper (`FORK`: a daemon, `STUBBORN`: a worker
    /// that ignores SIGTERM), lets it write, then ends the term.
    pub(crate) fn helper(
        &mut self,
        record: &mut FaultRecord,
        order: &'static str,
        role: char,
        hold_ms: u64,
        end: TermEnd,
    ) -> anyhow::Result<()> {
        let Some(i) = self.aim(record, Target::Leader, "no leader") else {
            return Ok(());
        };
        let identity = self.system.replicas[i].identity.clone();
        record.inject = time::now();
        self.system.resource.order(&identity, order);
        let wait = Instant::now() + Duration::from_secs(3);
        let mut helper = None;
        while helper.is_none() && Instant::now() < wait {
            helper = self.system.resource.latest(&identity, role, record.inject);
            sleep_ms(5);
        }
        self.system.resource.withdraw(&identity);
        let Some(helper) = helper else {
            record.skipped = Some(format!("no helper of r{i}'s command wrote within 3 s"));
            return Ok(());
        };
        sleep_ms(hold_ms);
        let end = self.end_term(i, end)?;
        record.clear = time::now();
        record.detail = Some(format!(
            "helper pid {} (token {}), term ended by {end:?}",
            helper.pid, helper.token
        ));
        Ok(())
    }

    /// Ends replica `i`'s term: SIGTERM and a start, or a dropped link past its renew
    /// deadline.
    fn end_term(&mut self, i: usize, end: TermEnd) -> anyhow::Result<TermEnd> {
        // Without the proxy in its path (a Sentinel or Cluster topology), SIGTERM it is.
        let end = match self.system.topo {
            crate::topology::Topo::Single => end,
            _ => TermEnd::Terminate,
        };
        match end {
            TermEnd::Terminate => self.terminate_and_start(i).map(|()| end),
            TermEnd::LinkDrop => {
                let hold = self.timing.renew_deadline + 2 * self.timing.retry_period;
                let proxy = &self.system.replicas[i].proxy;
                proxy.set(Fault::Drop);
                let from = time::now();
                std::thread::sleep(hold + Duration::from_millis(300));
                self.system.replicas[i].proxy.set(Fault::Pass);
                let to = time::now();
                let incarnation = self.system.replicas[i].incarnation();
                self.journal.links.push(Span {
                    replica: Some(i),
                    incarnation,
                    from,
                    to,
                    what: Impairment::LinkDrop,
                });
                Ok(end)
            }
        }
    }

    pub(crate) fn terminate_and_start(&mut self, i: usize) -> anyhow::Result<()> {
        let grace = self.timing.lease_duration + Duration::from_secs(5);
        let replica = &mut self.system.replicas[i];
        let (incarnation, at, exited) = replica.terminate(grace)?;
        if !exited {
            self.journal
                .notes
                .push(format!("r{i} did not exit within {grace:?} of SIGTERM"));
        }
        self.system.replicas[i].start()?;
        self.journal.downs.push(Span {
            replica: Some(i),
            incarnation,
            from: at,
            to: time::now(),
            what: Impairment::Terminated,
        });
        Ok(())
    }

    pub(crate) fn failing_work(&mut self, record: &mut FaultRecord, hold_ms: u64) {
        record.inject = time::now();
        let until = record.inject + i64::try_from(hold_ms).unwrap_or(0) * time::MS;
        self.system.resource.fail_until(Some(until));
        while time::now() < until {
            self.system.restart_exited();
            sleep_ms(10);
        }
        self.system.resource.fail_until(None);
        self.system.restart_exited();
        record.clear = time::now();
        self.span(None, record.inject, record.clear, Impairment::FailingWork);
    }
}
