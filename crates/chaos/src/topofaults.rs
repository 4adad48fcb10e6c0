//! The topology runs' own faults: a Sentinel failover under load, a Sentinel that accepts
//! connections and never answers while the master fails over, a `CLUSTER FAILOVER TAKEOVER` of
//! the lease slot's master, and a live migration of the lease's slot.

use anyhow::{Context, bail};

use crate::nemesis::{FaultRecord, Impairment, Nemesis, sleep_ms};
use crate::schedule::{FaultSpec, Scheduled};
use crate::time;
use crate::topology::Topo;
use testbed::proxy::Fault;

impl Nemesis<'_> {
    /// Injects one fault of a Sentinel or Cluster topology.
    pub fn inject_topology(
        &mut self,
        planned: &Scheduled,
        record: &mut FaultRecord,
    ) -> anyhow::Result<()> {
        record.target_led = false;
        match (&planned.fault, &self.system.topo) {
            (FaultSpec::SentinelFailover { via }, Topo::Sentinel(set)) => {
                record.inject = time::now();
                let (master, attempts) = set.failover(*via)?;
                record.clear = time::now();
                record.detail = Some(format!(
                    "SENTINEL FAILOVER through Sentinel {via} ({attempts} attempt(s)): master now on port {master}"
                ));
            }
            (FaultSpec::MuteSentinel { hold_ms }, Topo::Sentinel(set)) => {
                set.mute.set(Fault::Blackhole);
                record.inject = time::now();
                let failed_over = set.failover(1);
                let elapsed = u64::try_from((time::now() - record.inject) / time::MS).unwrap_or(0);
                sleep_ms(hold_ms.saturating_sub(elapsed));
                set.mute.set(Fault::Pass);
                record.clear = time::now();
                let (master, _) = failed_over?;
                record.detail = Some(format!(
                    "Sentinel 0 blackholed for {} ms; master failed over to port {master} meanwhile",
                    (record.clear - record.inject) / time::MS
                ));
            }
            (FaultSpec::ClusterFailover { settle_ms }, Topo::Cluster(cluster)) => {
                let slot = cluster.slot(&self.system.lease_key)?;
                record.inject = time::now();
                let (old, new) = cluster.takeover(slot)?;
                record.clear = time::now();
                sleep_ms(*settle_ms);
                record.detail = Some(format!(
                    "slot {slot}: replica on port {new} took over from {old}"
                ));
            }
            (FaultSpec::SlotMigration { settle_ms }, Topo::Cluster(cluster)) => {
                let slot = cluster.slot(&self.system.lease_key)?;
                record.inject = time::now();
                let (from, to) = cluster
                    .migrate(slot)
                    .with_context(|| format!("migrating slot {slot}"))?;
                record.clear = time::now();
                sleep_ms(*settle_ms);
                record.detail = Some(format!("slot {slot} moved from port {from} to {to}"));
            }
            (fault, _) => bail!("{fault:?} does not fit this run's topology"),
        }
        self.span(None, record.inject, record.clear, Impairment::Failover);
        Ok(())
    }
}
