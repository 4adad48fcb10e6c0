//! The whole system as a stateright model: replicas, Redis, the network between them, the
//! clocks, and the faults; with the properties that the checker verifies on every state.

use std::sync::atomic::{AtomicBool, Ordering};

use stateright::{Model, Property};

use crate::config::Config;
use crate::link::{Link, Request};
use crate::mirror::{AcquireReply, Name, Successor, Term};
use crate::redis::{Fault, Redis};
use crate::replica::{Ending, Renewal, Replica, Role};
use crate::sentinels::{SentinelWord, Sentinels};
use crate::symmetry;
use leasehold_core::clock::BootInstant;
use leasehold_core::elector::StepDownReason;

/// A message in flight. Requests carry the instant their attempt was sent, so that a reply
/// finds the attempt it answers (or nothing, when the sender gave up on it); the Redis node
/// they go to; and whether the Sentinels confirmed that node at the send instant, which the
/// reply carries back (`connection.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Msg {
    ToRedis {
        from: u8,
        sent_at: BootInstant,
        node: u8,
        confirmed: bool,
        request: Request,
    },
    /// `longest_ms` ends every acquire reply (the longest live claim).
    Acquired {
        to: u8,
        sent_at: BootInstant,
        confirmed: bool,
        reply: AcquireReply,
        longest_ms: u64,
    },
    Renewed {
        to: u8,
        sent_at: BootInstant,
        confirmed: bool,
        reply: Renewal,
    },
    /// An observe's reply: of what the script answers, the replica uses only the term the
    /// lease or the record holds.
    Observed {
        to: u8,
        sent_at: BootInstant,
        confirmed: bool,
        holder: Option<Term>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// One tick of every clock.
    Tick,
    /// One tick in which replica `n`'s clock stands still (it runs slow against Redis's).
    SlowTick(u8),
    TryAcquire(u8),
    AcquireTimedOut(u8),
    Watchdog(u8),
    RenewTimedOut(u8),
    /// Replica `n`, sitting out, reads the lease.
    Probe(u8),
    ObserveTimedOut(u8),
    WorkFails(u8),
    Deliver(Msg),
    Fault(Fault),
    /// An operator asks the current term to hand over (`leasehold step-down [--to]`).
    RequestHandover(Successor),
    /// Sentinel promotes the other node; the old master keeps running and writable.
    SentinelFailover,
    /// Sentinel `n` learns of the failover.
    SentinelLearns(u8),
}

/// States are ordered field by field (derived), time and replicas first: the symmetry
/// reduction compares the replicas before it renames the rest (`symmetry::representative`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct State {
    /// Model time in ticks: Redis's clock.
    pub time: u16,
    pub replicas: Vec<Replica>,
    pub redis: Redis,
    /// Messages in flight, sorted (a multiset: delivery in any order).
    pub net: Vec<Msg>,
    /// The highest token granted so far (kept by the model, not by Redis).
    pub max_token: u64,
    pub token_regressed: bool,
    pub stale_write: bool,
    /// Handover requests the operator made.
    pub handovers: u8,
    /// The replica whose term ended last by a handover, until another one leads.
    pub handed_over_by: Option<u8>,
    /// Some replica led after another one handed over.
    pub handover_completed: bool,
    /// The node a Sentinel failover promoted, beside the first master (`redis`).
    pub promoted: Option<Redis>,
    pub sentinels: Sentinels,
    /// The longest lease duration granted so far, in ms (kept by the model, and only where
    /// the configuration restricts data loss by it).
    pub longest_granted_ms: u64,
    /// Redis lost its data while a replica's guard passed in a term longer than another
    /// replica's lease duration (kept only where replicas run different timings).
    pub lost_under_longer: bool,
}

pub struct System {
    pub config: Config,
    /// Which properties some state has shown already (a counterexample or a witness).
    /// stateright 0.31 records a discovery again for every later state that shows it, so the
    /// path it keeps would be one of the last found, not the first; each property reports
    /// only its first state, which breadth-first on one thread is a shortest path.
    shown: [AtomicBool; 11],
}

impl System {
    pub fn new(config: Config) -> System {
        System {
            config,
            shown: Default::default(),
        }
    }

    /// Whether `state_shows` makes this the first state to show property `i`.
    pub fn first(&self, i: usize, state_shows: bool) -> bool {
        state_shows && !self.shown[i].swap(true, Ordering::Relaxed)
    }
}

impl State {
    fn take(&mut self, msg: &Msg) -> bool {
        match self.net.binary_search(msg) {
            Ok(i) => {
                self.net.remove(i);
                true
            }
            Err(_) => false,
        }
    }

    /// Whether a fault that loses data may happen now: always, unless the configuration waits
    /// until every replica still contending knows the longest lease duration granted so far
    /// (`Config::loss_after_following`).
    fn loss_allowed(&self, config: &Config) -> bool {
        !config.loss_after_following
            || self
                .replicas
                .iter()
                .filter(|r| r.role != Role::Done)
                .all(|r| r.timings.ttl_ms().max(r.followed_ms) >= self.longest_granted_ms)
    }

    /// Redis loses its data: the model notes whether a longer term than some replica's lease
    /// duration was valid then.
    fn losing_data(&mut self, config: &Config) {
        if !config.timings_differ() {
            return;
        }
        let shortest = (0..config.replicas)
            .map(|id| config.timings(id).ttl_ms())
            .min()
            .unwrap_or(0);
        let time = self.time;
        self.lost_under_longer |= self
            .replicas
            .iter()
            .any(|r| r.check_passes(time) && r.timings.ttl_ms() > shortest);
    }

    /// Whether `replica` leads in the term that `node`'s live lease key holds.
    pub fn leads_on(&self, node: &Redis, replica: &Replica) -> bool {
        matches!(replica.role, Role::Leader(lead) if node.live_term(self.time) == Some(lead.term))
    }

    pub fn send(&mut self, msg: Msg) {
        let at = self.net.binary_search(&msg).unwrap_or_else(|i| i);
        self.net.insert(at, msg);
    }

    pub fn step_down(&mut self, config: &Config, n: usize, ending: impl Into<Ending>) {
        let ending = ending.into();
        if ending.reason == StepDownReason::Handover {
            self.handed_over_by = Some(n as u8);
        }
        let now = self.replicas[n].now(self.time);
        if let Some(release) = self.replicas[n].step_down(now, ending, config.max_terms) {
            self.request(config, n as u8, now, release);
        }
    }
}

impl System {
    /// The least of `state`'s renamings, the one the checker keeps.
    fn representative(&self, state: State) -> State {
        symmetry::representative(state, self.config.replicas, |s: &State, r| {
            symmetry::rename_replicas(&s.replicas, r)
        })
        .0
    }

    /// One step from `last`, the replicas keeping their names (`next_state` then takes the
    /// representative of the result's renamings).
    pub fn step(&self, last: &State, action: Action) -> Option<State> {
        let c = &self.config;
        let mut s = last.clone();
        match action {
            Action::Tick => s.time += 1,
            Action::SlowTick(n) => {
                s.time += 1;
                s.replicas[n as usize].lag += 1;
            }
            Action::TryAcquire(n) => {
                let now = s.replicas[n as usize].now(s.time);
                let request = s.replicas[n as usize].try_acquire(now);
                s.request(c, n, now, request);
            }
            Action::AcquireTimedOut(n) => {
                let now = s.replicas[n as usize].now(s.time);
                let rate = c.rate(s.replicas[n as usize].timings);
                s.replicas[n as usize].acquired(now, None, c.acquire_again_when_unknown, rate);
                s.discard_connection(c, n);
            }
            Action::Watchdog(n) => {
                let now = s.replicas[n as usize].now(s.time);
                match s.replicas[n as usize].watchdog(now) {
                    Ok(request) => s.request(c, n, now, request),
                    Err(reason) => s.step_down(c, n as usize, reason),
                }
            }
            Action::RenewTimedOut(n) => {
                let now = s.replicas[n as usize].now(s.time);
                s.discard_connection(c, n);
                let rate = c.rate(s.replicas[n as usize].timings);
                if let Err(reason) = s.replicas[n as usize].renewed(now, None, rate) {
                    s.step_down(c, n as usize, reason);
                }
            }
            Action::Probe(n) => {
                let now = s.replicas[n as usize].now(s.time);
                let request = s.replicas[n as usize].probe(now);
                s.request(c, n, now, request);
            }
            Action::ObserveTimedOut(n) => {
                let now = s.replicas[n as usize].now(s.time);
                s.discard_connection(c, n);
                if let Some(release) = s.replicas[n as usize].observed(now, None) {
                    s.request(c, n, now, release);
                }
            }
            Action::WorkFails(n) => s.step_down(c, n as usize, StepDownReason::WorkFailed),
            Action::Deliver(msg) => {
                if !s.take(&msg) {
                    return None;
                }
                s.deliver(c, msg);
            }
            Action::Fault(fault) => {
                if fault.loses_data() {
                    s.losing_data(c);
                }
                s.redis.suffer(fault)
            }
            Action::SentinelFailover => {
                s.losing_data(c);
                s.sentinel_failover()
            }
            Action::SentinelLearns(sentinel) => s.sentinels.learn(sentinel),
            Action::RequestHandover(to) => {
                s.handovers += 1;
                if s.redis.request_handover(s.time, to).is_some() {
                    // The nudge on the channel reaches every leader as the script runs.
                    for r in &mut s.replicas {
                        let now = r.now(s.time);
                        r.nudged(now);
                    }
                }
            }
        }
        s.drop_unawaited();
        Some(s)
    }

    fn faults_allowed(&self, state: &State) -> bool {
        state.time < self.config.faults_until
    }

    fn tick_allowed(&self, state: &State) -> bool {
        let c = &self.config;
        if state.time >= c.horizon {
            return false;
        }
        if c.eager {
            // Fair and prompt: nothing in flight, nobody due.
            return state.net.is_empty()
                && state
                    .replicas
                    .iter()
                    .all(|r| !r.due(r.now(state.time), c.max_terms));
        }
        state.net.len() <= usize::from(c.max_delayed)
    }
}

impl Model for System {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let mut states: Vec<State> = initial_links(&self.config)
            .into_iter()
            .map(|links| State {
                time: 0,
                replicas: (0..self.config.replicas)
                    .zip(links)
                    .map(|(id, link)| Replica {
                        link,
                        health: self.config.health(id),
                        ..Replica::new(id, self.config.timings(id))
                    })
                    .collect(),
                redis: Redis::new(&self.config),
                net: Vec::new(),
                max_token: 0,
                token_regressed: false,
                stale_write: false,
                handovers: 0,
                handed_over_by: None,
                handover_completed: false,
                promoted: None,
                sentinels: Sentinels::default(),
                longest_granted_ms: 0,
                lost_under_longer: false,
            })
            .map(|s| self.representative(s))
            .collect();
        states.sort();
        states.dedup();
        states
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        let c = &self.config;
        if self.tick_allowed(state) {
            actions.push(Action::Tick);
            for r in &state.replicas {
                if r.lag < c.max_lag && state.time >= c.lag_every * u16::from(r.lag) {
                    actions.push(Action::SlowTick(r.id));
                }
            }
        }
        for r in &state.replicas {
            let now = r.now(state.time);
            let due = r.due(now, c.max_terms);
            match r.role {
                Role::Follower { .. } | Role::Paused { .. } if due => {
                    actions.push(Action::TryAcquire(r.id))
                }
                Role::Acquiring { .. } if due => actions.push(Action::AcquireTimedOut(r.id)),
                Role::SittingOut { .. } if due => actions.push(Action::Probe(r.id)),
                Role::Observing { .. } if due => actions.push(Action::ObserveTimedOut(r.id)),
                Role::Leader(lead) => {
                    if due && lead.renewing.is_some() {
                        actions.push(Action::RenewTimedOut(r.id));
                    } else if due {
                        actions.push(Action::Watchdog(r.id));
                    }
                    if c.work_failures {
                        actions.push(Action::WorkFails(r.id));
                    }
                }
                _ => {}
            }
        }
        for msg in &state.net {
            // A lost message is one delivered after the horizon (or never).
            actions.push(Action::Deliver(*msg));
        }
        if self.faults_allowed(state) {
            let loss = state.loss_allowed(c);
            for fault in [
                Fault::Evict,
                Fault::Restart { keep_data: true },
                Fault::Restart { keep_data: false },
                Fault::Failover,
            ] {
                if state.redis.can(c, state.time, fault) && (loss || !fault.loses_data()) {
                    actions.push(Action::Fault(fault));
                }
            }
            if state.sentinels.failovers < c.sentinel_failovers && loss {
                actions.push(Action::SentinelFailover);
            }
            if let Some(sentinel) = state.sentinels.next_to_learn() {
                actions.push(Action::SentinelLearns(sentinel));
            }
            // To any replica, or to one named (not the holder: the command refuses that).
            if state.handovers < c.handovers
                && let Some(term) = state.redis.live_term(state.time)
            {
                actions.push(Action::RequestHandover(Successor::Anyone));
                for r in state.replicas.iter().filter(|r| r.id != term.owner) {
                    let name = Successor::Named(Name::Replica(r.id));
                    actions.push(Action::RequestHandover(name));
                }
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        self.step(last, action)
            .map(|next| self.representative(next))
    }

    fn properties(&self) -> Vec<Property<Self>> {
        self.checked_properties()
    }
}

/// The connections a run starts with, one list per initial state: not yet made; under a pre-fix
/// word, each replica may list any Sentinel first (the deaf one, or one that hears of the
/// failover).
fn initial_links(config: &Config) -> Vec<Vec<Link>> {
    let mut all = vec![Vec::new()];
    let firsts: Vec<u8> =
        if config.sentinel_failovers > 0 && config.sentinel_word != SentinelWord::Majority {
            (0..crate::sentinels::SENTINELS as u8).collect()
        } else {
            vec![0]
        };
    // Nothing connects before the first call (`RedisLease::new`): the first request dials. The
    // configurations without a Sentinel failover keep their states as they were.
    let dial = config.sentinel_failovers > 0;
    for _ in 0..config.replicas {
        all = all
            .into_iter()
            .flat_map(|links: Vec<Link>| {
                firsts.iter().map(move |first| {
                    let mut longer = links.clone();
                    longer.push(Link {
                        first: *first,
                        dial,
                        ..Link::default()
                    });
                    longer
                })
            })
            .collect();
    }
    all
}
