//! Keys of the lease that leasehold did not write: the lease key, or the handover reservation,
//! set to a foreign value without expiry (a lock entry that "just sits there, for ever").
//! leasehold must never take it over and must say so: the nemesis waits (bounded) until every
//! replica has logged it at error level, looks that nobody leads meanwhile, then clears it with
//! the command the runbook gives (`DEL <key>`), after which the replicas must lead again.

use std::time::Duration;

use crate::events::Event;
use crate::nemesis::{FaultRecord, Impairment, Nemesis, sleep_ms};
use crate::params::{ForeignKey, Target};
use crate::redis_cli::RedisCli;
use crate::time::{self, Micros};
use testbed::wait::first_instant;

/// What leasehold logs at error level, once per occurrence, when a key of the lease never
/// expires and is not its own (`note_blocked` in crates/core/src/elector/notices.rs).
pub const BLOCKED: &str = "a key of the lease never expires and was not written by leasehold; nobody can lead until it is deleted (leasehold does not take it over)";

/// The foreign value: no owner id, no term, and no replica's identity.
const FOREIGN: &str = "chaos-foreign-entry";

impl Nemesis<'_> {
    /// Writes the key, waits until every replica said it blocks the lease (or the bound
    /// passed), holds `hold_ms` more, deletes it.
    pub(crate) fn foreign_key(
        &mut self,
        record: &mut FaultRecord,
        which: ForeignKey,
        hold_ms: u64,
    ) -> anyhow::Result<()> {
        let Some(leader) = self.aim(record, Target::Leader, "no leader") else {
            return Ok(());
        };
        let key = match which {
            ForeignKey::Lease => self.system.lease_key.clone(),
            ForeignKey::Reservation => format!("{}:reserved", self.system.lease_key),
        };
        record.inject = time::now();
        self.system.redis.cli(0, &["SET", &key, FOREIGN])?;
        if which == ForeignKey::Reservation {
            self.terminate_and_start(leader)?;
        }
        // A follower tries at least every retry period; the leader finds the new value at its
        // next renewal, steps down, and tries as a follower.
        let t = self.timing;
        let bound = t.lease_duration + 4 * t.retry_period + Duration::from_secs(3);
        let said = self.wait_said(record.inject, bound);
        let mut led = self.system.leader();
        sleep_ms(hold_ms);
        led = led.or(self.system.leader());
        let reply = self.system.redis.cli(0, &["DEL", &key])?;
        record.clear = time::now();
        let n = said.len();
        let count = said.iter().flatten().count();
        record.said = Some((count, n));
        let when: Vec<String> = said
            .iter()
            .enumerate()
            .map(|(i, at)| match at {
                Some(at) => format!("r{i} +{} ms", (at - record.inject) / time::MS),
                None => format!("r{i} never"),
            })
            .collect();
        let index = record.index;
        if count < n {
            self.journal.notes.push(format!(
                "fault #{index}: {} of {n} replicas did not say within {bound:?} that {key} blocks the lease",
                n - count
            ));
        }
        if let Some((l, token)) = led {
            self.journal.notes.push(format!(
                "fault #{index}: r{l} led (token {token}) while {key} had no expiry"
            ));
        }
        record.detail = Some(format!(
            "SET {key} {FOREIGN} (no TTL){}; said by {count} of {n} ({}); {}; DEL ({reply})",
            match which {
                ForeignKey::Lease => String::new(),
                ForeignKey::Reservation => format!(", r{leader} SIGTERMed"),
            },
            when.join(", "),
            led.map_or("nobody led meanwhile".to_owned(), |(l, _)| format!(
                "r{l} LED meanwhile"
            )),
        ));
        self.span(None, record.inject, record.clear, Impairment::ForeignKey);
        Ok(())
    }

    /// When each replica (by index) logged at error level, at or after `since`, that a key
    /// blocks the lease; waits until all have, or `bound` passed. Replicas whose process ended
    /// on its own are started again meanwhile.
    fn wait_said(&mut self, since: Micros, bound: Duration) -> Vec<Option<Micros>> {
        let mut said = vec![None; self.system.replicas.len()];
        first_instant(bound, || {
            self.system.restart_exited();
            for (at, replica) in said.iter_mut().zip(&self.system.replicas) {
                if at.is_none() {
                    *at = replica
                        .events_since(since)
                        .into_iter()
                        .find(|e| matches!(&e.event, Event::Warning { message } if message == BLOCKED))
                        .map(|e| e.at);
                }
            }
            said.iter().all(Option::is_some)
        });
        said
    }
}
