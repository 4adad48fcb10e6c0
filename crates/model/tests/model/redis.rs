//! Redis in the model: one dataset that the mirrored scripts change atomically, the identity
//! of the process answering (changed by every restart and failover), its clock (the model's
//! time), and the faults it suffers.

use crate::config::{Config, TICK_MS, Timings};
use crate::link::Request;
use crate::mirror::{Acquisition, Data, Longest, Record, RenewReply, Successor, Term};
use leasehold_core::elector::decide;

/// How long an operator's handover request lives (`step-down --wait`): one lease duration, the
/// standard one (the handover configurations run no other).
const HANDOVER_TTL_MS: u64 = 5 * TICK_MS;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Redis {
    pub data: Data,
    /// Stands for `run_id/master_replid`.
    pub server: u8,
    /// The dataset before the last write: what an asynchronous replica that missed that write
    /// holds (kept only when failovers or Sentinel failovers are in the configuration).
    pub before_last_write: Option<Data>,
    pub evictions: u8,
    pub restarts_keeping_data: u8,
    pub restarts_losing_data: u8,
    pub failovers: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fault {
    /// The lease key goes before its time (eviction, `DEL`); the record stays.
    Evict,
    Restart {
        keep_data: bool,
    },
    /// A replica that missed the last write is promoted.
    Failover,
}

impl Fault {
    /// Whether the fault may lose keys without a TTL (the record, `:longest`): a restart
    /// without the data, or a failover to a replica that missed the last write.
    pub fn loses_data(self) -> bool {
        matches!(self, Fault::Restart { keep_data: false } | Fault::Failover)
    }
}

/// What a script did, as the replies and the checks need it.
pub enum Applied {
    Acquire(Acquisition),
    Renew(RenewReply),
    /// The term a release announced on the channel.
    Release(Option<Term>),
    /// The term the lease key or the record holds, as `observe` answers.
    Observe(Option<Term>),
}

impl Redis {
    pub fn new(config: &Config) -> Redis {
        // A Redis that the lease has used before: the record is there and its cooldown over
        // (a new Redis starts with a cooldown of one lease duration, which only lengthens every
        // run; restarts and failovers in the model reach that case).
        let data = Data {
            lease: None,
            fence: None,
            record: Some(Record {
                server: 0,
                cool_until_us: 0,
                term: None,
                term_until_us: 0,
            }),
            handover: None,
            reserved: None,
            longest: None,
        };
        Redis {
            data,
            server: 0,
            before_last_write: (config.failovers > 0 || config.sentinel_failovers > 0)
                .then_some(data),
            evictions: 0,
            restarts_keeping_data: 0,
            restarts_losing_data: 0,
            failovers: 0,
        }
    }

    /// Redis's clock (`TIME`, in µs) at model time `time`: one tick ahead of the model's, so
    /// that no instant a script writes is 0, which the scripts read as none (the loss instant
    /// in `:longest`); a real server's clock is never there.
    pub fn now_us(time: u16) -> u64 {
        (u64::from(time) + 1) * TICK_MS * 1000
    }

    /// An instant of Redis's clock as model time, for traces.
    pub fn secs(us: u64) -> String {
        let secs = us as f64 / 1e6 - (TICK_MS as f64 / 1e3);
        format!("{secs}s")
    }

    /// Every key whose TTL ran out by model time `time` is gone.
    pub fn expire(&mut self, time: u16) {
        self.data.expire(Self::now_us(time));
    }

    /// Runs the script behind `request` from replica `from`, which runs `timings`, at model
    /// time `time`.
    pub fn apply(
        &mut self,
        config: &Config,
        time: u16,
        from: u8,
        timings: Timings,
        request: Request,
    ) -> Applied {
        let sem = config.sem;
        let ttl_ms = timings.ttl_ms();
        let now = Self::now_us(time);
        // An expired key is gone for every script (Redis expires on access).
        self.data.expire(now);
        let before = self.data;
        let server = self.server;
        let applied = match request {
            Request::Acquire { observed, cover_ms } => Applied::Acquire(
                self.data
                    .acquire(sem, now, server, from, ttl_ms, true, observed, cover_ms),
            ),
            Request::Renew { term } => {
                Applied::Renew(self.data.renew(sem, now, server, term, ttl_ms))
            }
            Request::Release { term, reserve } => {
                // The reservation lasts as long as the elector asks (`decide::reservation`).
                let ms = decide::reservation(&timings.timing()).as_millis() as u64;
                let reserve = reserve.map(|name| (name, ms));
                Applied::Release(self.data.release(sem, now, term, false, reserve))
            }
            Request::Observe => Applied::Observe(self.data.observe(now, server).holder),
        };
        if !config.timings_differ() {
            // Every replica runs one lease duration T: every claim is T and every cover T
            // whatever the claim says, and a reply's longest claim never raises what a replica
            // knows. Of `:longest` only the loss instant can change what a script does (a
            // running cooldown is extended from it, or from now without it), so the model
            // keeps that alone and the states differ in nothing else.
            self.data.longest = self
                .data
                .longest
                .filter(|l| l.loss_us > 0)
                .map(|l| Longest {
                    loss_us: l.loss_us,
                    ..Longest::default()
                });
        }
        if self.before_last_write.is_some() && self.data != before {
            self.before_last_write = Some(before);
        }
        applied
    }

    /// An operator's handover request for the term the lease holds now, handing to `to`:
    /// the term it was made for, if there is one.
    pub fn request_handover(&mut self, time: u16, to: Successor) -> Option<Term> {
        let term = self.live_term(time)?;
        let before = self.data;
        let made = self
            .data
            .request_handover(Self::now_us(time), term, to, HANDOVER_TTL_MS);
        if self.before_last_write.is_some() && self.data != before {
            self.before_last_write = Some(before);
        }
        made.then_some(term)
    }

    /// The lease key if it is still alive at `time`.
    pub fn live_term(&self, time: u16) -> Option<Term> {
        self.data.live_lease(Self::now_us(time)).map(|(t, _)| t)
    }

    pub fn can(&self, config: &Config, time: u16, fault: Fault) -> bool {
        match fault {
            Fault::Evict => self.evictions < config.evictions && self.live_term(time).is_some(),
            Fault::Restart { keep_data: true } => {
                self.restarts_keeping_data < config.restarts_keeping_data
            }
            Fault::Restart { keep_data: false } => {
                self.restarts_losing_data < config.restarts_losing_data
            }
            Fault::Failover => {
                self.failovers < config.failovers && self.before_last_write != Some(self.data)
            }
        }
    }

    pub fn suffer(&mut self, fault: Fault) {
        match fault {
            Fault::Evict => {
                self.evictions += 1;
                self.data.lease = None;
            }
            Fault::Restart { keep_data } => {
                if keep_data {
                    self.restarts_keeping_data += 1;
                } else {
                    self.restarts_losing_data += 1;
                    self.data = Data::default();
                }
                self.server += 1;
            }
            Fault::Failover => {
                self.failovers += 1;
                if let Some(older) = self.before_last_write {
                    self.data = older;
                }
                self.server += 1;
            }
        }
        if self.before_last_write.is_some() {
            self.before_last_write = Some(self.data);
        }
    }
}

/// Whether a renewal or release carrying `sent` changed the state of another term: the lease
/// key or the record named a different term before, and the script changed it.
pub fn touched_another_term(before: &Data, after: &Data, sent: Term) -> bool {
    let key_changed = before.lease != after.lease;
    let key_other = before.lease.is_some_and(|(t, _)| t != sent);
    let record_term = |d: &Data| d.record.map(|r| (r.term, r.term_until_us));
    let record_changed = record_term(before) != record_term(after);
    let record_other = before
        .record
        .and_then(|r| r.term)
        .is_some_and(|t| t != sent);
    (key_changed && key_other) || (record_changed && record_other)
}
