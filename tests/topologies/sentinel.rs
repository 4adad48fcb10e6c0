//! Sentinel: one master, one replica and three Sentinels as real processes. Kill the master
//! while a leader holds the lease: the old leader steps down by its validity deadline, a
//! leader emerges on the promoted replica (after the cooldown: another Redis process answers),
//! tokens keep increasing, and no validity windows overlap; on each engine. A frozen Sentinel first in the URL
//! does not keep the replicas from electing a leader. A master that Sentinel replaced but that
//! stays writable does not keep a leader beside the one on the new master, even when the
//! Sentinel its leader asks first never heard of the failover.

use std::sync::Arc;
use std::time::Duration;

use harness::contenders::{
    ActionLog, Contender, Did, acting_work, lease, shut_down_all, unique_lease,
};
use leasehold::clock::BootInstant;
use leasehold::elector::{Role, StepDownReason, Timing};
use leasehold::lease::FencingToken;
use testbed::on_engines;
use testbed::redis_server::Engine;
use testbed::sentinel::SentinelSet;
use testbed::wait::{eventually, until};

fn timing() -> Timing {
    harness::contenders::steady_timing()
}

on_engines!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn a_master_failover_moves_leadership_safely_to_the_new_master);
async fn a_master_failover_moves_leadership_safely_to_the_new_master(engine: Engine) {
    let mut set = SentinelSet::start_on(engine);
    let old_master = set.master.port();
    let name = unique_lease("sentinel");
    let log: ActionLog = Arc::default();
    let contenders: Vec<Contender> = ["pod-a", "pod-b", "pod-c"]
        .iter()
        .map(|who| {
            Contender::spawn(
                lease(&set.url(), &name, who, true),
                timing(),
                acting_work(log.clone(), Duration::from_millis(5), None),
            )
        })
        .collect();
    let first = eventually(
        "a leader through Sentinel",
        Duration::from_secs(10),
        || async { contenders.iter().position(Contender::is_leader) },
    )
    .await;
    let first_token = contenders[first].token().unwrap();
    let key = format!("leasehold:{{{name}}}");
    let holder: String = set.master.cmd(&["GET", &key]);
    assert_eq!(
        holder,
        format!("{}#{first_token}", contenders[first].owner),
        "the lease is on the master"
    );

    set.master.kill();
    let killed = BootInstant::now();
    let mut status = contenders[first].status.clone();
    let after = until(
        "the old leader to step down",
        &mut status,
        timing().lease_duration * 2,
        |s| !matches!(s.role, Role::Leader { .. }),
    )
    .await;
    let reason = after.last_step_down.map(|s| s.reason);
    assert!(
        matches!(
            reason,
            Some(StepDownReason::RenewDeadlinePassed | StepDownReason::ValidityDeadlinePassed)
        ),
        "{reason:?}"
    );
    let second = eventually(
        "a leader on the promoted replica",
        Duration::from_secs(30),
        || async { contenders.iter().position(Contender::is_leader) },
    )
    .await;
    eprintln!(
        "master killed → new leader after {:?}",
        BootInstant::now().saturating_duration_since(killed)
    );
    assert_ne!(
        set.master_port(),
        Some(old_master),
        "Sentinel promoted the replica"
    );
    assert_eq!(set.master_port(), Some(set.replica.port()));
    let second_token = contenders[second].token().unwrap();
    assert!(
        second_token > first_token,
        "{second_token} > {first_token}: the TIME floor held"
    );
    let holder: String = set.replica.cmd(&["GET", &key]);
    assert_eq!(
        holder,
        format!("{}#{second_token}", contenders[second].owner),
        "the lease is on the new master"
    );
    let (log, tokens) = shut_down_all(contenders, &log).await;
    assert!(tokens.len() >= 2, "{tokens:?}");
    // The old leader's last action came before the new leader's first.
    let old_last = log
        .iter()
        .filter(|a| a.token == first_token && a.did == Did::Act)
        .map(|a| a.at)
        .max()
        .unwrap();
    let new_first = log
        .iter()
        .filter(|a| a.token == second_token && a.did == Did::Act)
        .map(|a| a.at)
        .min()
        .unwrap();
    assert!(old_last < new_first);
}

/// Starts two contenders of a fresh lease on `set` and returns how long until one leads.
async fn time_to_a_leader(set: &SentinelSet, test: &str) -> Duration {
    let name = unique_lease(test);
    let started = BootInstant::now();
    let contenders: Vec<Contender> = ["pod-a", "pod-b"]
        .iter()
        .map(|who| {
            Contender::spawn(
                lease(&set.url(), &name, who, false),
                timing(),
                acting_work(ActionLog::default(), Duration::from_millis(5), None),
            )
        })
        .collect();
    eventually(
        &format!("a leader through Sentinel ({test})"),
        Duration::from_secs(10),
        || async { contenders.iter().any(Contender::is_leader).then_some(()) },
    )
    .await;
    let took = BootInstant::now().saturating_duration_since(started);
    for c in contenders {
        c.shutdown().await;
    }
    took
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_first_sentinel_does_not_stop_the_election() {
    let set = SentinelSet::start();
    let healthy = time_to_a_leader(&set, "sentinels-healthy").await;
    // The first Sentinel of the URL accepts connections and never answers.
    set.signal_sentinel(0, nix::sys::signal::Signal::SIGSTOP);
    let frozen = time_to_a_leader(&set, "sentinel-frozen").await;
    eprintln!("time to a leader: all Sentinels healthy {healthy:?}, the first frozen {frozen:?}");
    // Comparable: one acquire attempt (300 ms here) on top of the healthy case at most, where
    // asking the Sentinels in turn never got past the frozen one.
    let bound = healthy + timing().acquire_timeout();
    assert!(
        frozen <= bound,
        "with the first Sentinel frozen a leader took {frozen:?}, more than {bound:?}"
    );
    set.signal_sentinel(0, nix::sys::signal::Signal::SIGCONT);
}

/// A majority of the Sentinels silent is said as such: a renewal whose call ends before their
/// asks' own bound is refused for want of a majority, not timed out as if Redis were slow (which
/// the elector would take for a slow link).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_majority_of_the_sentinels_is_said_as_such() {
    use leasehold::lease::{Acquired, LeaseError};
    let set = SentinelSet::start();
    let leader = lease(&set.url(), &unique_lease("silent"), "pod-a", false);
    let ttl = Duration::from_secs(5);
    let Acquired::Leader(grant) = leader.acquire(ttl, ttl).await.unwrap() else {
        panic!("all Sentinels answer: the acquire leads");
    };
    for i in [1, 2] {
        set.signal_sentinel(i, nix::sys::signal::Signal::SIGSTOP);
    }
    // Shorter than an ask's own bound of 2 s.
    let renewed = leader
        .renew(grant.token, ttl, Duration::from_millis(800))
        .await;
    for i in [1, 2] {
        set.signal_sentinel(i, nix::sys::signal::Signal::SIGCONT);
    }
    let err = renewed.expect_err("two of three Sentinels are silent");
    assert!(matches!(err, LeaseError::Connection { .. }), "{err:?}");
    let said = err.to_string();
    assert!(said.contains("no majority (2 of 3)"), "{said}");
    assert!(said.contains("2 did not answer"), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_replicas_refuses_leadership_when_too_few_acknowledge() {
    use leasehold::lease::{
        Acquired, LeaseError, LeaseName, LeaseOptions, OwnerId, RedisLease, WaitReplicas,
    };
    let set = SentinelSet::start();
    let name = unique_lease("wait");
    let with_wait = |replicas| {
        let options = LeaseOptions {
            cooldown_on_data_loss: false,
            wait_replicas: Some(WaitReplicas {
                replicas,
                timeout: Duration::from_millis(200),
            }),
            ..LeaseOptions::default()
        };
        RedisLease::new(
            &set.url(),
            LeaseName::new(name.as_str()).unwrap(),
            OwnerId::generate("pod-a").unwrap(),
            options,
        )
        .unwrap()
    };
    // One replica exists and acknowledges.
    let one = with_wait(1);
    let Acquired::Leader(grant) = one
        .acquire(Duration::from_secs(2), Duration::from_secs(2))
        .await
        .unwrap()
    else {
        panic!("one replica acknowledges: the acquire leads");
    };
    one.release(grant.token, Duration::from_secs(2))
        .await
        .unwrap();
    // Two are wanted: refused, and the lease is given back.
    let two = with_wait(2);
    let err = two
        .acquire(Duration::from_secs(2), Duration::from_secs(2))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            LeaseError::TooFewReplicas {
                acked: 1,
                wanted: 2,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "only 1 of 2 replicas acknowledged the write in time while taking the lease (--redis-wait-replicas)"
    );
    let left: Option<String> = set.master.cmd(&["GET", &format!("leasehold:{{{name}}}")]);
    assert_eq!(left, None, "an unconfirmed term gives the lease back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_kept_on_a_master_that_sentinel_replaced_never_leads_beside_the_new_masters_leader()
 {
    // The old master cannot be made a replica (its REPLICAOF is renamed away), so after the
    // failover it stays up and writable, as a master that Sentinel no longer names.
    let set = SentinelSet::start_with_master_args(KEPT_WRITABLE);
    let name = unique_lease("sentinel-stale-master");
    let log: ActionLog = Arc::default();
    let work = || acting_work(log.clone(), Duration::from_millis(5), None);
    let (old, first_token) = a_leader_on_the_first_master(&set.url(), &name, &log).await;

    set.failover();
    eventually(
        "Sentinel to name the replica as the master",
        Duration::from_secs(20),
        || async { (set.master_port() == Some(set.replica.port())).then_some(()) },
    )
    .await;
    let role: Vec<redis::Value> = set.master.cmd(&["ROLE"]);
    assert_eq!(
        role.first(),
        Some(&redis::Value::BulkString(b"master".to_vec())),
        "the old master still takes writes"
    );

    let switched = BootInstant::now();
    // A contender that starts now finds the new master through Sentinel.
    let new = Contender::spawn(lease(&set.url(), &name, "pod-b", true), timing(), work());
    let key = format!("leasehold:{{{name}}}");
    let (leader, token) =
        the_leader_on_the_new_master(&set, [&old, &new], &key, switched, &log).await;
    eprintln!(
        "{leader} leads on the new master (token {token}, the first term's {first_token}); \
         pod-a leading now: {:?}",
        old.token()
    );
    shut_down_all([old, new], &log).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_that_missed_the_failover_does_not_keep_a_leader_on_the_old_master() {
    // The old master stays writable after the failover (its REPLICAOF is renamed away), and the
    // third Sentinel is deaf: it never hears of the failover and keeps naming the old master.
    // The old leader lists the deaf Sentinel first; the contender lists the other two first.
    let set = SentinelSet::start_with_a_deaf_sentinel(KEPT_WRITABLE);
    let name = unique_lease("sentinel-deaf");
    let log: ActionLog = Arc::default();
    let work = || acting_work(log.clone(), Duration::from_millis(5), None);
    let (old, first_token) =
        a_leader_on_the_first_master(&set.url_in_order(&[2, 0, 1]), &name, &log).await;

    set.failover();
    eventually(
        "two Sentinels to name the replica as the master",
        Duration::from_secs(20),
        || async {
            let replica = Some(set.replica.port());
            (set.master_port_named_by(0) == replica && set.master_port_named_by(1) == replica)
                .then_some(())
        },
    )
    .await;
    assert_eq!(
        set.master_port_named_by(2),
        Some(set.master.port()),
        "the deaf Sentinel still names the old master"
    );
    let switched = BootInstant::now();
    let new = Contender::spawn(
        lease(&set.url_in_order(&[0, 1, 2]), &name, "pod-b", true),
        timing(),
        work(),
    );
    let key = format!("leasehold:{{{name}}}");
    let (leader, token) =
        the_leader_on_the_new_master(&set, [&old, &new], &key, switched, &log).await;
    assert_eq!(
        set.master_port_named_by(2),
        Some(set.master.port()),
        "the deaf Sentinel named the old master throughout"
    );
    // Nobody renews on the old master any more: its copy of the key runs out.
    eventually(
        "the old master's copy of the lease to run out",
        timing().lease_duration * 2,
        || async {
            let on_old: Option<String> = set.master.cmd(&["GET", &key]);
            on_old.is_none().then_some(())
        },
    )
    .await;
    eprintln!(
        "{leader} leads on the new master {:?} after the switch (token {token}, the first \
         term's {first_token}); pod-a's term now: {:?}",
        BootInstant::now().saturating_duration_since(switched),
        old.token()
    );
    shut_down_all([old, new], &log).await;
}

/// Master arguments that keep the old master writable after a failover: Sentinel cannot make
/// it a replica, as when it is cut off from the Sentinels.
const KEPT_WRITABLE: &[&str] = &[
    "--rename-command",
    "REPLICAOF",
    "replicaof-renamed-away",
    "--rename-command",
    "SLAVEOF",
    "slaveof-renamed-away",
];

/// Starts pod-a on `url`, acting into `log`, and waits until it leads; returns it and its token.
async fn a_leader_on_the_first_master(
    url: &str,
    name: &str,
    log: &ActionLog,
) -> (Contender, FencingToken) {
    let work = acting_work(log.clone(), Duration::from_millis(5), None);
    let old = Contender::spawn(lease(url, name, "pod-a", true), timing(), work);
    eventually(
        "a leader on the first master",
        Duration::from_secs(10),
        || async { old.is_leader().then_some(()) },
    )
    .await;
    let token = old.token().expect("a leader has a token");
    (old, token)
}

/// The contender that leads on the new master (the replica) and its token, once its term has
/// acted there for a lease duration after `switched`. The replica copied the first term's key;
/// a lease duration after the switch that copy has expired unless a leader renewed it there.
/// A leader still renewing on the old master would act in that time too.
async fn the_leader_on_the_new_master(
    set: &SentinelSet,
    contenders: [&Contender; 2],
    key: &str,
    switched: BootInstant,
    log: &ActionLog,
) -> (String, FencingToken) {
    let (leader, token) = eventually(
        "a leader on the new master",
        Duration::from_secs(20),
        || async {
            let holder: Option<String> = set.replica.cmd(&["GET", key]);
            let holder = holder?;
            contenders
                .into_iter()
                .find(|c| c.is_leader() && holder.starts_with(&c.owner))
                .and_then(|c| Some((c.identity.clone(), c.token()?)))
                .filter(|_| {
                    BootInstant::now().saturating_duration_since(switched)
                        >= timing().lease_duration
                })
        },
    )
    .await;
    eventually(
        "the leader on the new master to act for a lease duration",
        Duration::from_secs(10),
        || async {
            let log = log.lock().unwrap();
            let acts = log
                .iter()
                .filter(|a| a.token == token && a.did == Did::Act && a.at >= switched);
            let first = acts.clone().map(|a| a.at).min()?;
            let last = acts.map(|a| a.at).max()?;
            (last.saturating_duration_since(first) >= timing().lease_duration).then_some(())
        },
    )
    .await;
    (leader, token)
}
