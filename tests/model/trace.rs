//! A counterexample in readable steps: what happened, then who leads and what Redis holds.

use std::fmt::Write;

use stateright::Checker;

use crate::mirror::Term;
use crate::replica::{Request, Role};
use crate::symmetry::{self, Rename, Renaming};
use crate::system::{Action, Msg, State, System};

fn term(t: Term) -> String {
    format!("r{}#{}", t.owner, t.token)
}

fn secs(i: leasehold::clock::BootInstant) -> String {
    format!("{:.3}s", i.since_boot().as_secs_f64())
}

fn message(m: &Msg) -> String {
    match m {
        Msg::ToRedis { from, request, .. } => match request {
            Request::Acquire { observed: None } => format!("r{from}'s acquire"),
            Request::Acquire { observed: Some(t) } => {
                format!("r{from}'s acquire (observing {})", term(*t))
            }
            Request::Renew { term: t } => format!("r{from}'s renewal of {}", term(*t)),
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
        Msg::Acquired { to, reply, .. } => format!("acquire reply {reply:?} to r{to}"),
        Msg::Renewed { to, reply, .. } => format!("renew reply {reply:?} to r{to}"),
    }
}

pub fn action(a: &Action) -> String {
    match a {
        Action::Tick => "one second passes".into(),
        Action::SlowTick(n) => format!("one second passes; r{n}'s clock runs slow and misses it"),
        Action::TryAcquire(n) => format!("r{n} sends an acquire"),
        Action::AcquireTimedOut(n) => format!("r{n} gives up waiting for its acquire"),
        Action::Watchdog(n) => format!("r{n}'s watchdog wakes"),
        Action::RenewTimedOut(n) => format!("r{n} gives up waiting for its renewal"),
        Action::WorkFails(n) => format!("r{n}'s work fails"),
        Action::Deliver(m) => format!("delivered: {}", message(m)),
        Action::Fault(f) => format!("Redis fault: {f:?}"),
        Action::RequestHandover(to) => {
            format!("an operator asks for a handover to {}", to.text())
        }
    }
}

pub fn state(s: &State) -> String {
    let mut out = format!("t={}s", s.time);
    for r in &s.replicas {
        let role = match r.role {
            Role::Follower { next_try } => format!("follower (tries at {})", secs(next_try)),
            Role::Paused { until } => format!("pausing until {}", secs(until)),
            Role::Acquiring { .. } => "acquiring".into(),
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
    }
    let key = match s.redis.live_term(s.time) {
        Some(t) => term(t),
        None => "-".into(),
    };
    let record = match s.redis.data.record {
        Some(r) => format!(
            "{} until {}s (server {})",
            r.term.map(term).unwrap_or_else(|| "-".into()),
            r.term_until_us / 1_000_000,
            r.server
        ),
        None => "none".into(),
    };
    let _ = write!(
        out,
        " | redis {}: key {key}, record {record}",
        s.redis.server
    );
    let now_us = u64::from(s.time) * 1_000_000;
    let mut data = s.redis.data;
    data.expire(now_us);
    if let Some((request, _)) = data.handover {
        let _ = write!(out, ", handover request `{}`", request.text());
    }
    if let Some((name, _)) = data.reserved {
        let _ = write!(out, ", reserved for {}", name.text());
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
    let mut out = String::new();
    // `names[i]`: the first state's name of the replica that this state calls `i`.
    let mut names: Vec<u8> = (0..system.config.replicas).collect();
    for (i, (s, a)) in path.into_vec().into_iter().enumerate() {
        let shown = Renaming { to: &names };
        let _ = writeln!(out, "  {:>2}. {}", i, state(&s.rename(&shown)));
        if let Some(a) = a {
            let _ = writeln!(out, "      -> {}", action(&a.rename(&shown)));
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
