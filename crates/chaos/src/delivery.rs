//! Faults of delivery: the leader's link delayed past the call timeout (commands time out and
//! land later), and a follower's pub/sub connection blackholed while its command link works.

use std::time::Duration;

use crate::nemesis::{FaultRecord, Impairment, Nemesis, sleep_ms};
use crate::redis_cli::RedisCli;
use crate::schedule::Target;
use crate::time;
use testbed::proxy::Fault;

impl Nemesis<'_> {
    /// The client ports of Redis's subscribed connections (a proxy's upstream ports).
    fn subscribed_ports(&self) -> anyhow::Result<Vec<u16>> {
        let clients = self.system.redis.clients()?;
        Ok(clients
            .into_iter()
            .filter(|(_, sub)| *sub)
            .map(|(p, _)| p)
            .collect())
    }

    pub(crate) fn late_delivery(
        &mut self,
        record: &mut FaultRecord,
        delay_ms: u64,
        hold_ms: u64,
        one_connection: bool,
    ) -> anyhow::Result<()> {
        let Some(i) = self.aim(record, Target::Leader, "no leader") else {
            return Ok(());
        };
        let link = Fault::Delay(Duration::from_millis(delay_ms));
        let one = if one_connection {
            let subscribed = self.subscribed_ports()?;
            let ports = self.system.replicas[i].proxy.upstream_ports();
            ports.into_iter().find(|p| !subscribed.contains(p))
        } else {
            None
        };
        let proxy = &self.system.replicas[i].proxy;
        match one {
            Some(port) => proxy.set_one(port, link),
            None => proxy.set(link),
        }
        record.inject = time::now();
        sleep_ms(hold_ms);
        let proxy = &self.system.replicas[i].proxy;
        match one {
            Some(port) => proxy.clear_one(port),
            None => proxy.set(Fault::Pass),
        }
        record.clear = time::now();
        record.detail = Some(match one {
            Some(port) => format!("{delay_ms} ms on the command connection (port {port})"),
            None => format!("{delay_ms} ms on every connection"),
        });
        self.span(Some(i), record.inject, record.clear, Impairment::LateLink);
        Ok(())
    }

    pub(crate) fn dead_subscription(
        &mut self,
        record: &mut FaultRecord,
        follower: Target,
        hold_ms: u64,
        release_after_ms: u64,
    ) -> anyhow::Result<()> {
        let j = self.aim_at_follower(record, follower);
        let subscribed = self.subscribed_ports()?;
        let Some(port) = self.system.replicas[j]
            .proxy
            .upstream_ports()
            .into_iter()
            .find(|p| subscribed.contains(p))
        else {
            record.skipped = Some(format!("r{j} has no subscribed connection"));
            return Ok(());
        };
        self.system.replicas[j]
            .proxy
            .set_one(port, Fault::Blackhole);
        record.inject = time::now();
        sleep_ms(release_after_ms);
        let leader = self.system.leader();
        if let Some((l, _)) = leader
            && l != j
        {
            self.terminate_and_start(l)?;
        }
        let left = hold_ms.saturating_sub(release_after_ms);
        sleep_ms(left);
        self.system.replicas[j].proxy.clear_one(port);
        record.clear = time::now();
        record.detail = Some(format!(
            "r{j}'s subscription (port {port}) blackholed; leader {} SIGTERMed after {release_after_ms} ms",
            leader.map_or("none".to_owned(), |(l, _)| format!("r{l}"))
        ));
        self.span(
            Some(j),
            record.inject,
            record.clear,
            Impairment::DeadSubscription,
        );
        Ok(())
    }
}
