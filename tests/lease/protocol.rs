//! The lease's protocol across releases: replicas of 0.2.0 (protocol 1, which never wrote the
//! `:protocol` key) and of this release share a lease, each reading the other's keys, and no
//! two lead; keys written in a higher protocol keep a replica out, with words that say which
//! release wrote them and what to do. 0.2.0 is run as its own scripts, kept unchanged under
//! `release_0_2_0/`.

use std::time::Duration;

use harness::contenders::{lease, unique_lease};
use harness::replica::{FAST, Replica, lease_status};
use leasehold::lease::{
    Acquired, FencingToken, LeaseKeys, LeaseName, PROTOCOL, Protocol, Released, Renewed,
};
use redis::Value;
use testbed::on_engines;
use testbed::redis_server::{Engine, RedisServer};
use testbed::wait::wait_for;

const TTL: Duration = Duration::from_millis(1000);
const CALL: Duration = Duration::from_secs(2);
const NEWER: &str = "the lease is written in a newer protocol than this leasehold speaks; out of the election. Finish the rollout to the newer release, or to roll back, stop every replica of it and run `leasehold remove-keys` once nobody leads";

/// A replica of leasehold 0.2.0, as its scripts run on Redis.
struct Release020<'a> {
    redis: &'a RedisServer,
    keys: LeaseKeys,
    owner: String,
}

impl Release020<'_> {
    fn eval(&self, script: &str, keys: &[&str], args: &[&str]) -> Value {
        let count = keys.len().to_string();
        let mut all = vec!["EVAL", script, count.as_str()];
        all.extend(keys);
        all.extend(args);
        self.redis.cmd(&all)
    }

    /// Its acquire, with the data-loss cooldown off: the reply's first word and second item.
    fn acquire(&self) -> (String, String) {
        let k = &self.keys;
        let reply = self.eval(
            concat!(
                include_str!("release_0_2_0/record.lua"),
                include_str!("release_0_2_0/acquire.lua")
            ),
            &[&k.lease, &k.fence, &k.state, &k.reserved, &k.longest],
            &[
                &self.owner,
                "1000",
                "0",
                "",
                "old",
                "1000",
                &k.channel,
                "",
                "",
            ],
        );
        let Value::Array(items) = reply else {
            panic!("0.2.0's acquire answered {reply:?}");
        };
        let word = |v: &Value| match v {
            Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            Value::Int(i) => i.to_string(),
            other => format!("{other:?}"),
        };
        (word(&items[0]), word(&items[1]))
    }

    fn term(&self, token: &str) -> String {
        format!("{}#{token}", self.owner)
    }

    fn renew(&self, token: &str) -> Value {
        let k = &self.keys;
        self.eval(
            concat!(
                include_str!("release_0_2_0/record.lua"),
                include_str!("release_0_2_0/renew.lua")
            ),
            &[&k.lease, &k.state, &k.handover, &k.longest],
            &[&self.term(token), "1000"],
        )
    }

    fn release(&self, token: &str) -> Value {
        let k = &self.keys;
        self.eval(
            concat!(
                include_str!("release_0_2_0/record.lua"),
                include_str!("release_0_2_0/release.lua")
            ),
            &[&k.lease, &k.state, &k.handover, &k.reserved],
            &[&self.term(token), &k.channel, "term", "", "0"],
        )
    }
}

on_engines!(#[tokio::test] async fn the_previous_release_and_this_one_share_a_lease_and_never_both_lead);
async fn the_previous_release_and_this_one_share_a_lease_and_never_both_lead(engine: Engine) {
    let redis = RedisServer::start_on(engine);
    let name = unique_lease("protocol-mixed");
    let keys = LeaseKeys::new("leasehold:", &LeaseName::new(&name).unwrap()).unwrap();
    let old = Release020 {
        redis: &redis,
        keys: keys.clone(),
        owner: "old-0b7c2b5e-6a4c-4a39-9a55-0d9b1b1f0c3e".into(),
    };
    // With its cooldown on, this release would cool down if it took 0.2.0's record for lost data.
    let new = lease(&redis.url(), &name, "new", true);

    let (word, first) = old.acquire();
    assert_eq!(word, "ACQUIRED", "0.2.0 starts the lease: {first}");
    match new.acquire(TTL, CALL).await.unwrap() {
        Acquired::HeldBy(holder) => {
            assert_eq!(holder.owner, old.owner);
            assert_eq!(holder.token.map(|t| t.0.to_string()), Some(first.clone()));
        }
        other => panic!("0.2.0's term must hold against this release, got {other:?}"),
    }
    assert_eq!(old.renew(&first), Value::Int(1), "0.2.0 renews beside us");
    assert_eq!(old.release(&first), Value::Int(1));

    let Acquired::Leader(grant) = new.acquire(TTL, CALL).await.unwrap() else {
        panic!("a released 0.2.0 term must pass to this release");
    };
    assert!(grant.token.0 > first.parse::<u64>().unwrap());
    let written: String = redis.cmd(&["GET", &keys.protocol]);
    assert_eq!(written, format!("{PROTOCOL} {}", env!("CARGO_PKG_VERSION")));
    let (word, holder) = old.acquire();
    assert_eq!(
        (word.as_str(), holder),
        ("HELD", new.owner().term(grant.token)),
        "0.2.0 must see this release's term as held"
    );
    assert!(matches!(
        new.renew(grant.token, TTL, CALL).await.unwrap(),
        Renewed::Held(_)
    ));
    assert_eq!(
        new.observe(CALL).await.unwrap().protocol,
        Some(Protocol::ours())
    );
    assert_eq!(
        new.release(grant.token, CALL).await.unwrap(),
        Released::Released
    );

    let (word, third) = old.acquire();
    assert_eq!(word, "ACQUIRED", "0.2.0 takes over after this release");
    assert!(third.parse::<u64>().unwrap() > grant.token.0);
    assert!(matches!(
        new.renew(grant.token, TTL, CALL).await.unwrap(),
        Renewed::NotHeld { .. }
    ));
}

on_engines!(#[tokio::test] async fn keys_in_a_newer_protocol_are_neither_read_nor_written);
async fn keys_in_a_newer_protocol_are_neither_read_nor_written(engine: Engine) {
    let redis = RedisServer::start_on(engine);
    let name = unique_lease("protocol-newer");
    let new = lease(&redis.url(), &name, "new", true);
    let keys = new.keys().clone();
    let newer = format!("{} 9.0.0", PROTOCOL + 1);
    for (value, want) in [
        (
            newer.as_str(),
            Protocol {
                version: Some(PROTOCOL + 1),
                release: "9.0.0".into(),
            },
        ),
        (
            "blue-green",
            Protocol {
                version: None,
                release: "blue-green".into(),
            },
        ),
    ] {
        let _: () = redis.cmd(&["SET", &keys.protocol, value]);
        assert_eq!(
            new.acquire(TTL, CALL).await.unwrap(),
            Acquired::NewerProtocol(want.clone())
        );
        for key in [&keys.lease, &keys.fence, &keys.state, &keys.longest] {
            let exists: u32 = redis.cmd(&["EXISTS", key]);
            assert_eq!(exists, 0, "{key} must not be written under {value}");
        }
        assert_eq!(new.observe(CALL).await.unwrap().protocol, Some(want));
    }
    // An earlier release of this very protocol is ours to read, and the winner writes its own.
    let _: () = redis.cmd(&["SET", &keys.protocol, &format!("{PROTOCOL} 0.0.1")]);
    let acquired = new.acquire(TTL, CALL).await.unwrap();
    assert!(
        matches!(acquired, Acquired::CoolingDown { started: true, .. }),
        "a fresh Redis cools down first: {acquired:?}"
    );
    let token = testbed::wait::eventually("the cooldown to end", TTL * 4, || async {
        match new.acquire(TTL, CALL).await.unwrap() {
            Acquired::Leader(grant) => Some(grant.token),
            _ => None,
        }
    })
    .await;
    assert!(token > FencingToken(0));
    assert_eq!(
        new.observe(CALL).await.unwrap().protocol,
        Some(Protocol::ours())
    );
}

#[test]
fn a_replica_stays_out_of_a_newer_protocol_says_what_to_do_and_leads_once_it_is_gone() {
    let redis = RedisServer::start();
    let lease = unique_lease("protocol-out");
    let protocol_key = format!("leasehold:{{{lease}}}:protocol");
    let newer = format!("{} 9.0.0", PROTOCOL + 1);
    let _: () = redis.cmd(&["SET", &protocol_key, &newer]);
    let replicas: Vec<Replica> = ["a", "b"]
        .iter()
        .map(|name| Replica::spawn(&redis.url(), &lease, name, &FAST, &[]))
        .collect();
    for r in &replicas {
        let found = wait_for(
            "/leader to name the protocol",
            Duration::from_secs(15),
            || {
                let view = r.leader();
                let found = &view["redis"]["newer_protocol"];
                (!found.is_null()).then(|| found.clone())
            },
        );
        assert_eq!(found["version"], PROTOCOL + 1, "{found}");
        assert_eq!(found["release"], "9.0.0", "{found}");
        let reason = r.wait_not_ready_reason(Duration::from_secs(5));
        assert!(
            reason.contains(&format!(
                "protocol {} (leasehold 9.0.0), newer than this replica's protocol {PROTOCOL}",
                PROTOCOL + 1
            )),
            "{reason}"
        );
    }
    // Several more tries, none of which took the lease or said it again.
    let from = redis.calls("evalsha");
    wait_for("more tries", Duration::from_secs(15), || {
        (redis.calls("evalsha") >= from + 6).then_some(())
    });
    for r in &replicas {
        assert_eq!(r.events(NEWER).len(), 1, "said once: {}", r.log_text());
        assert_eq!(r.leader()["is_leader"], false);
    }
    let lease_key = format!("leasehold:{{{lease}}}");
    let fence: u32 = redis.cmd(&["EXISTS", &lease_key, &format!("{lease_key}:fence")]);
    assert_eq!(fence, 0, "nothing of the lease was written");
    let text = lease_status(&redis.url(), &lease);
    assert!(
        text.contains(&format!(
            "protocol    {} (leasehold 9.0.0), newer than this leasehold's protocol {PROTOCOL}",
            PROTOCOL + 1
        )),
        "{text}"
    );

    // The newer replicas are gone and their keys removed: one of these leads.
    let _: () = redis.cmd(&["DEL", &protocol_key]);
    wait_for("a leader", Duration::from_secs(15), || {
        replicas
            .iter()
            .any(|r| r.leader()["is_leader"] == true)
            .then_some(())
    });
    for r in &replicas {
        wait_for(
            "/leader to drop the protocol",
            Duration::from_secs(5),
            || {
                r.leader()["redis"]["newer_protocol"]
                    .is_null()
                    .then_some(())
            },
        );
    }
    let written: String = redis.cmd(&["GET", &protocol_key]);
    assert_eq!(written, format!("{PROTOCOL} {}", env!("CARGO_PKG_VERSION")));
}
