//! A counterexample in readable steps: what happened, then who leads and what Redis holds.

use std::fmt::Write;

use stateright::Checker;

use crate::link::{Health, Request};
use crate::mirror::Term;
use crate::redis::Redis;
use crate::replica::{Renewal, Role};
use crate::symmetry::{self, Rename, Renaming};
use crate::system::{Action, Msg, State, System};

fn term(t: Term) -> String {
    format!("r{}#{}", t.owner, t.token)
}

/// A lease duration in ms, as seconds.
fn ms(ms: u64) -> String {
    format!("{}s", ms as f64 / 1000.0)
}

fn secs(i: leasehold_core::clock::BootInstant) -> String {
    format!("{:.3}s", i.since_boot().as_secs_f64())
}

/// A message; with `nodes` (a Sentinel failover is in the configuration) the node a request
/// went to and whether its node was confirmed.
fn message(m: &Msg, nodes: bool) -> String {
    let sent = |text: String, node: u8, confirmed: bool| match (nodes, confirmed) {
        (false, _) => text,
        (true, true) => format!("{text} to node {node}"),
        (true, false) => {
            format!("{text} to node {node} (unconfirmed: the Sentinels' rule names another node)")
        }
    };
    let answered = |text: String, confirmed: bool| {
        if confirmed {
            text
        } else {
            format!("{text} (unconfirmed: it dials again and resends)")
        }
    };
    match m {
        Msg::ToRedis {
            from,
            request,
            node,
            confirmed,
            ..
        } => sent(
            match request {
                Request::Acquire {
                    observed: None,
                    cover_ms,
                } => format!("r{from}'s acquire (cover {})", ms(*cover_ms)),
                Request::Acquire {
                    observed: Some(t),
                    cover_ms,
                } => {
                    format!(
                        "r{from}'s acquire (observing {}, cover {})",
                        term(*t),
                        ms(*cover_ms)
                    )
                }
                Request::Renew { term: t } => format!("r{from}'s renewal of {}", term(*t)),
                Request::Observe => format!("r{from}'s observe"),
                Request::Release {
                    term: t,
                    reserve: None,
                } => format!("r{from}'s release of {}", term(*t)),
                Request::Release {
                    term: t,
                    reserve: Some(name),
                } => format!(
                    "r{from}'s release of {}, reserving the next term for {}",
                    term(*t),
                    name.text()
                ),
            },
            *node,
            *confirmed,
        ),
        Msg::Acquired {
            to,
            reply,
            confirmed,
            longest_ms,
            ..
        } => {
            // The model carries a claim only when it is longer than the replica's own.
            let longest = match longest_ms {
                0 => String::new(),
                n => format!(", longest claim {}", ms(*n)),
            };
            answered(
                format!("acquire reply {reply:?}{longest} to r{to}"),
                *confirmed,
            )
        }
        Msg::Renewed {
            to,
            reply,
            confirmed,
            ..
        } => answered(
            match reply {
                Renewal::Ran(reply) => format!("renew reply {reply:?} to r{to}"),
                Renewal::Refused => format!("r{to}'s renewal refused"),
            },
            *confirmed,
        ),
        Msg::Observed {
            to,
            holder,
            confirmed,
            ..
        } => answered(
            format!(
                "observe reply to r{to}: held by {}",
                holder.map_or("nobody".into(), term)
            ),
            *confirmed,
        ),
    }
}

fn action(a: &Action, nodes: bool) -> String {
    match a {
        Action::Tick => "one second passes".into(),
        Action::SlowTick(n) => format!("one second passes; r{n}'s clock runs slow and misses it"),
        Action::TryAcquire(n) => format!("r{n} sends an acquire"),
        Action::AcquireTimedOut(n) => format!("r{n} gives up waiting for its acquire"),
        Action::Watchdog(n) => format!("r{n}'s watchdog wakes"),
        Action::RenewTimedOut(n) => format!("r{n} gives up waiting for its renewal"),
        Action::Probe(n) => format!("r{n}, sitting out, sends an observe"),
        Action::ObserveTimedOut(n) => format!("r{n} gives up waiting for its observe"),
        Action::WorkFails(n) => format!("r{n}'s work fails"),
        Action::Deliver(m) => format!("delivered: {}", message(m, nodes)),
        Action::Fault(f) => format!("Redis fault: {f:?}"),
        Action::RequestHandover(to) => {
            format!("an operator asks for a handover to {}", to.text())
        }
        Action::SentinelFailover => "Sentinel failover: node 1 promoted with the dataset as \
            before node 0's last write and a new identity; node 0 keeps running and writable; \
            Sentinel 1 names node 1"
            .into(),
        Action::SentinelLearns(n) => format!("Sentinel {n} learns of the failover"),
    }
}

/// One Redis node: its identity, the lease key, the record, the handover keys.
fn redis(redis: &Redis, time: u16) -> String {
    let key = match redis.live_term(time) {
        Some(t) => term(t),
        None => "-".into(),
    };
    let record = match redis.data.record {
        Some(r) => {
            let held = match r.term {
                Some(t) => format!("{} until {}", term(t), Redis::secs(r.term_until_us)),
                None => "-".into(),
            };
            let cooling = if r.cool_until_us > Redis::now_us(time) {
                format!(", cooling down until {}", Redis::secs(r.cool_until_us))
            } else {
                String::new()
            };
            format!("{held}{cooling} (server {})", r.server)
        }
        None => "none".into(),
    };
    let mut out = format!("redis {}: key {key}, record {record}", redis.server);
    // The keys as a script would see them now: those whose TTL ran out are gone.
    let mut now = *redis;
    now.expire(time);
    let data = now.data;
    if let Some((request, _)) = data.handover {
        let _ = write!(out, ", handover request `{}`", request.text());
    }
    if let Some((name, _)) = data.reserved {
        let _ = write!(out, ", reserved for {}", name.text());
    }
    if let Some(l) = data.longest {
        let loss = match l.loss_us {
            0 => String::new(),
            us => format!(", loss found at {}", Redis::secs(us)),
        };
        let claim = match l.ms {
            0 => "no claim".into(),
            n => format!(
                "longest {} claimed until {}",
                ms(n),
                Redis::secs(l.claim_until_us)
            ),
        };
        let _ = write!(out, ", {claim}{loss}");
    }
    out
}

/// One state; with `mixed` (the replicas run different timings) each replica's lease duration
/// and the longest it knows.
fn state(s: &State, nodes: bool, mixed: bool) -> String {
    let mut out = format!("t={}s", s.time);
    for r in &s.replicas {
        let role = match r.role {
            Role::Follower { next_try } => format!("follower (tries at {})", secs(next_try)),
            Role::Paused { until } => format!("pausing until {}", secs(until)),
            Role::Acquiring { .. } => "acquiring".into(),
            Role::SittingOut { next_probe } => {
                format!("sitting out (reads at {})", secs(next_probe))
            }
            Role::Observing { .. } => "sitting out, observing".into(),
            Role::Leader(l) => format!(
                "LEADER {} valid until {}{}",
                term(l.term),
                secs(l.valid_until),
                if r.check_passes(s.time) {
                    ", guard passes"
                } else {
                    ""
                }
            ),
            Role::Done => "done".into(),
        };
        let _ = write!(out, " | r{} clock {}: {role}", r.id, secs(r.now(s.time)));
        if r.health != Health::Healthy {
            let _ = write!(out, " ({:?})", r.health);
        }
        if mixed {
            let _ = write!(
                out,
                " (lease {}, knows {})",
                ms(r.timings.ttl_ms()),
                ms(r.knows_ms())
            );
        }
        if nodes {
            let dial = if r.link.dial { ", dials next" } else { "" };
            let _ = write!(
                out,
                " (on node {}{dial}, lists Sentinel {} first)",
                r.link.node, r.link.first
            );
        }
    }
    if nodes {
        let _ = write!(out, " | node 0 {}", redis(&s.redis, s.time));
        if let Some(promoted) = &s.promoted {
            let _ = write!(out, " | node 1 {}", redis(promoted, s.time));
        }
        let majority = match s.sentinels.majority() {
            Some(node) => format!("node {node}"),
            None => "none".into(),
        };
        let _ = write!(
            out,
            " | Sentinels name {:?} (majority: {majority})",
            s.sentinels.views
        );
    } else {
        let _ = write!(out, " | {}", redis(&s.redis, s.time));
    }
    let _ = write!(out, ", in flight {}", s.net.len());
    if s.token_regressed {
        out.push_str(" | A TOKEN WENT BACK");
    }
    if s.stale_write {
        out.push_str(" | A MESSAGE CHANGED ANOTHER TERM");
    }
    out
}

/// The shortest path to a discovery (the checker runs breadth-first), one line per step. The
/// checker keeps one renaming of each state (`symmetry`), so consecutive states of the path
/// may number the replicas differently: the trace follows each replica from the first state
/// on and prints it under that first name throughout.
pub fn counterexample(checker: &dyn Checker<System>, property: &'static str) -> Option<String> {
    let path = checker.discovery(property)?;
    let system = checker.model();
    let nodes = system.config.sentinel_failovers > 0;
    let mixed = system.config.timings_differ();
    let mut out = String::new();
    // `names[i]`: the first state's name of the replica that this state calls `i`.
    let mut names: Vec<u8> = (0..system.config.replicas).collect();
    for (i, (s, a)) in path.into_vec().into_iter().enumerate() {
        let shown = Renaming { to: &names };
        let _ = writeln!(
            out,
            "  {:>2}. {}",
            i,
            state(&s.rename(&shown), nodes, mixed)
        );
        if let Some(a) = a {
            let _ = writeln!(out, "      -> {}", action(&a.rename(&shown), nodes));
            if let Some(next) = system.step(&s, a) {
                let (_, to) =
                    symmetry::representative(next, system.config.replicas, |s: &State, r| {
                        symmetry::rename_replicas(&s.replicas, r)
                    });
                let mut renamed = names.clone();
                for (old, new) in to.iter().enumerate() {
                    renamed[usize::from(*new)] = names[old];
                }
                names = renamed;
            }
        }
    }
    Some(out)
}
