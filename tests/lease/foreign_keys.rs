//! Keys of a lease that leasehold did not write: a lease key or a handover reservation without
//! an expiry (the seed's lock entry that "just sits there, forever"), a key of the wrong type, a
//! fence at the end of its range, and a holder under this replica's own identity. leasehold
//! takes none of them over; it says each once, where an operator looks (the log at error level,
//! `/leader`, `/readyz`, `leasehold status`, a metric), and carries on once it is cleared.

use std::time::Duration;

use harness::contenders::unique_lease;
use harness::replica::{FAST, Replica, lease_status};
use leasehold::lease::{Acquired, Reservation};
use testbed::redis_server::RedisServer;
use testbed::wait::wait_for;

const BLOCKED: &str = "a key of the lease never expires and was not written by leasehold; nobody can lead until it is deleted (leasehold does not take it over)";

/// Waits until the replicas have tried `tries` more times (acquire scripts Redis ran).
fn wait_tries(redis: &RedisServer, tries: u64) {
    let from = redis.calls("evalsha");
    wait_for("more tries", Duration::from_secs(15), || {
        (redis.calls("evalsha") >= from + tries).then_some(())
    });
}

fn metric_line(replica: &Replica, line: &str) -> bool {
    replica
        .get("/metrics")
        .is_some_and(|(_, body)| body.lines().any(|l| l == line))
}

/// A key that outlasts any term leasehold writes (over an hour) blocks the lease as one without
/// expiry does: the replicas followed its "holder" in silence, for 292 million years.
#[test]
fn a_lease_key_that_outlasts_any_term_blocks_the_lease_too() {
    let redis = RedisServer::start();
    let lease = unique_lease("long-ttl");
    let key = format!("leasehold:{{{lease}}}");
    let _: () = redis.cmd(&["SET", &key, "foreign", "PX", "9223370000000000000"]);
    let a = Replica::spawn(&redis.url(), &lease, "a", &FAST, &[]);
    wait_for("/leader to name the key", Duration::from_secs(15), || {
        (!a.leader()["redis"]["blocked"].is_null()).then_some(())
    });
    // The line may reach the log a moment after `/leader` shows the key.
    wait_for("the log to say it", Duration::from_secs(5), || {
        (!a.events(BLOCKED).is_empty()).then_some(())
    });
    assert_eq!(a.events(BLOCKED).len(), 1, "{}", a.log_text());
    assert!(metric_line(&a, "leasehold_lease_blocked{key=\"lease\"} 1"));
    // `status` and `step-down` judge it by the same rule.
    let text = lease_status(&redis.url(), &lease);
    assert!(
        text.contains("never expires: not written by leasehold"),
        "{text}"
    );
    let (code, _, stderr) = harness::replica::step_down(&redis.url(), &lease, &["--wait", "1s"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("never expires (not written by leasehold)"),
        "{stderr}"
    );

    // A handover's reservation lasts two retry periods, which may pass an hour: leasehold's own.
    let lease = unique_lease("long-reservation");
    let key = format!("leasehold:{{{lease}}}:reserved");
    let _: () = redis.cmd(&["SET", &key, "pod-x", "PX", "5400000"]);
    let b = Replica::spawn(&redis.url(), &lease, "b", &FAST, &[]);
    wait_tries(&redis, 4);
    assert!(b.leader()["redis"]["blocked"].is_null(), "{}", b.leader());
    assert!(b.events(BLOCKED).is_empty(), "{}", b.log_text());
}

/// A dead leader's key given a foreign TTL of hours, then deleted as the log's `clear` says: a
/// follower leads at its next try. It went on passing the dead term with the TTL it had seen,
/// so the state record kept that term held for the whole foreign TTL (2 h here).
#[test]
fn a_dead_leaders_key_kept_by_a_foreign_expire_frees_the_lease_once_deleted() {
    let redis = RedisServer::start();
    let lease = unique_lease("foreign-expire");
    let key = format!("leasehold:{{{lease}}}");
    let mut args = FAST.to_vec();
    args.push("--no-data-loss-cooldown");
    let a = Replica::spawn(&redis.url(), &lease, "a", &args, &[]);
    wait_for("a to lead", Duration::from_secs(10), || {
        a.is_ready().then_some(())
    });
    let b = Replica::spawn(&redis.url(), &lease, "b", &args, &[]);
    b.wait_events("following leader", 1, Duration::from_secs(5));
    a.signal(nix::sys::signal::Signal::SIGKILL);
    let kept: i64 = redis.cmd(&["EXPIRE", &key, "7200"]);
    assert_eq!(kept, 1, "a's key was gone before the EXPIRE");
    b.wait_events(BLOCKED, 1, Duration::from_secs(10));
    let _: () = redis.cmd(&["DEL", &key]);
    wait_for("b to lead", Duration::from_secs(10), || {
        b.is_ready().then_some(())
    });
}

#[test]
fn a_lease_key_without_expiry_blocks_the_lease_and_is_said_once_where_operators_look() {
    for value in ["garbage", "pod-x-0b7c2b5e-6a4c-4a39-9a55-0d9b1b1f0c3e#17"] {
        let redis = RedisServer::start();
        let lease = unique_lease("no-ttl");
        let key = format!("leasehold:{{{lease}}}");
        let _: () = redis.cmd(&["SET", &key, value]);
        let replicas: Vec<Replica> = ["a", "b"]
            .iter()
            .map(|name| Replica::spawn(&redis.url(), &lease, name, &FAST, &[]))
            .collect();
        for r in &replicas {
            let blocked = wait_for("/leader to name the key", Duration::from_secs(15), || {
                let view = r.leader();
                (!view["redis"]["blocked"].is_null()).then(|| view["redis"]["blocked"].clone())
            });
            assert_eq!(blocked["what"], "lease", "{blocked}");
            assert_eq!(blocked["key"], key.as_str(), "{blocked}");
            assert_eq!(blocked["value"], value, "{blocked}");
            assert_eq!(blocked["clear"], format!("DEL {key}"), "{blocked}");
            let (code, words) = r.get("/readyz").expect("/readyz answers");
            assert_eq!(code, 503);
            assert!(words.contains("never expires"), "{words}");
            assert!(metric_line(r, "leasehold_lease_blocked{key=\"lease\"} 1"));
        }
        // Said once per occurrence, not at every try.
        wait_tries(&redis, 8);
        for r in &replicas {
            let said = r.events(BLOCKED);
            assert_eq!(said.len(), 1, "{}", r.log_text());
            assert_eq!(said[0]["level"], "ERROR");
            assert_eq!(said[0]["clear"], format!("DEL {key}"));
            assert_eq!(r.leader()["is_leader"], false, "never taken over");
        }
        assert_eq!(redis.cmd::<String>(&["GET", &key]), value, "untouched");
        let text = lease_status(&redis.url(), &lease);
        assert!(
            text.contains("expires in  never expires: not written by leasehold"),
            "{text}"
        );
        assert!(
            text.contains("token       -\n") || value.contains('#'),
            "{text}"
        );

        // Cleared: someone leads, and the metric says so.
        let _: i64 = redis.cmd(&["DEL", &key]);
        let leader = wait_for(
            "a leader once the key is gone",
            Duration::from_secs(15),
            || replicas.iter().find(|r| r.leader()["is_leader"] == true),
        );
        assert!(metric_line(
            leader,
            "leasehold_lease_blocked{key=\"lease\"} 0"
        ));
        assert!(leader.leader()["redis"]["blocked"].is_null());
    }
}

#[test]
fn a_reservation_without_expiry_is_said_once_and_does_not_make_followers_spin() {
    let redis = RedisServer::start();
    let lease = unique_lease("reserved-no-ttl");
    let key = format!("leasehold:{{{lease}}}:reserved");
    let _: () = redis.cmd(&["SET", &key, "nobody"]);
    let replicas: Vec<Replica> = ["a", "b"]
        .iter()
        .map(|name| Replica::spawn(&redis.url(), &lease, name, &FAST, &[]))
        .collect();
    for r in &replicas {
        wait_for(
            "/leader to name the reservation",
            Duration::from_secs(15),
            || (r.leader()["redis"]["blocked"]["what"] == "reservation").then_some(()),
        );
    }
    // Idle followers try about once per retry period (250 ms, with jitter), not every
    // millisecond: two of them over two seconds stay far below a hundred tries.
    let from = redis.calls("evalsha");
    let window = std::time::Instant::now();
    wait_for("two seconds of trying", Duration::from_secs(5), || {
        (window.elapsed() >= Duration::from_secs(2)).then_some(())
    });
    let tries = redis.calls("evalsha") - from;
    assert!(tries < 40, "{tries} tries in 2 s from two idle followers");
    for r in &replicas {
        assert_eq!(r.events(BLOCKED).len(), 1, "{}", r.log_text());
        assert!(metric_line(
            r,
            "leasehold_lease_blocked{key=\"reservation\"} 1"
        ));
    }
    let text = lease_status(&redis.url(), &lease);
    assert!(
        text.contains("reserved    for nobody, never expires"),
        "{text}"
    );

    let _: i64 = redis.cmd(&["DEL", &key]);
    wait_for(
        "a leader once the reservation is gone",
        Duration::from_secs(15),
        || replicas.iter().find(|r| r.leader()["is_leader"] == true),
    );
}

/// A reservation without expiry does not stop the leader (its renewals never read it), but it
/// keeps every other replica out: a step-down would leave nobody able to lead, and a handover
/// to a named replica would write over a key leasehold does not own. Both are refused.
#[test]
fn step_down_refuses_a_reservation_that_leasehold_did_not_write() {
    let redis = RedisServer::start();
    let lease = unique_lease("reserved-under-leader");
    let replicas: Vec<Replica> = ["a", "b"]
        .iter()
        .map(|name| Replica::spawn(&redis.url(), &lease, name, &FAST, &[]))
        .collect();
    let leader = wait_for("a leader", Duration::from_secs(15), || {
        replicas.iter().position(|r| r.is_ready())
    });
    let key = format!("leasehold:{{{lease}}}:reserved");
    let _: () = redis.cmd(&["SET", &key, "foo"]);
    let other = ["b", "a"][leader];
    for extra in [vec!["--wait", "2s"], vec!["--wait", "2s", "--to", other]] {
        let (code, json, stderr) = harness::replica::step_down(&redis.url(), &lease, &extra);
        assert_eq!(code, 1, "{extra:?}: {stderr}\n{json}");
        assert!(
            stderr.contains(&format!("{key} holds `foo` and never expires")),
            "{extra:?}: {stderr}"
        );
        let request: i64 = redis.cmd(&["EXISTS", &format!("leasehold:{{{lease}}}:handover")]);
        assert_eq!(request, 0, "{extra:?}: a handover request was stored");
    }
    assert!(replicas[leader].is_ready(), "the leader was asked to go");
    let kept: String = redis.cmd(&["GET", &key]);
    assert_eq!(kept, "foo");
    // To the one replica it names, the handover goes ahead, and leaves the key alone.
    let _: () = redis.cmd(&["SET", &key, other]);
    let (code, json, stderr) =
        harness::replica::step_down(&redis.url(), &lease, &["--wait", "5s", "--to", other]);
    assert_eq!(code, 0, "{stderr}\n{json}");
    assert_eq!(json["leader"], other, "{json}");
}

/// The release that hands the next term over writes the reservation only where no key without
/// expiry stands: a handover request stored past `step-down`'s look does not take it over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_handing_over_leaves_a_reservation_without_expiry_alone() {
    let redis = RedisServer::start();
    let name = unique_lease("reserved-release");
    let a = harness::contenders::lease(&redis.url(), &name, "web-a", false);
    let call = Duration::from_secs(2);
    let Acquired::Leader(grant) = a.acquire(Duration::from_secs(2), call).await.unwrap() else {
        panic!("a leads")
    };
    let key = format!("leasehold:{{{name}}}:reserved");
    let _: () = redis.cmd(&["SET", &key, "foo"]);
    let reserve = Reservation {
        identity: "web-b".into(),
        duration: Duration::from_millis(400),
    };
    a.release_handing_over(grant.token, Some(&reserve), call)
        .await
        .unwrap();
    let kept: String = redis.cmd(&["GET", &key]);
    assert_eq!(kept, "foo");
    let ttl: i64 = redis.cmd(&["PTTL", &key]);
    assert_eq!(ttl, -1);
}

#[test]
fn a_key_of_the_wrong_type_is_named_with_its_type() {
    let redis = RedisServer::start();
    let lease = unique_lease("wrong-type");
    let state = format!("leasehold:{{{lease}}}:state");
    let _: i64 = redis.cmd(&["HSET", &state, "field", "value"]);
    let a = Replica::spawn(&redis.url(), &lease, "a", &FAST, &[]);
    let error = wait_for("the error in /leader", Duration::from_secs(15), || {
        a.leader()["redis"]["last_error"]
            .as_str()
            .map(str::to_owned)
    });
    assert!(
        error.contains(&format!("`{state}` holds a hash")),
        "{error}"
    );
    assert!(!error.contains(":marker"), "{error}");
    let (_, words) = a.get("/readyz").expect("/readyz answers");
    assert!(!words.contains("unreachable"), "{words}");
}

#[test]
fn a_fence_at_the_end_of_its_range_gets_the_clear_error_of_a_bad_fence() {
    let redis = RedisServer::start();
    let lease = unique_lease("fence-max");
    let fence = format!("leasehold:{{{lease}}}:fence");
    let _: () = redis.cmd(&["SET", &fence, &i64::MAX.to_string()]);
    let a = Replica::spawn(&redis.url(), &lease, "a", &FAST, &[]);
    // The first acquire on a new Redis starts the cooldown; the one after it meets the fence.
    let error = wait_for("the error in /leader", Duration::from_secs(15), || {
        a.leader()["redis"]["last_error"]
            .as_str()
            .filter(|e| e.contains("fence"))
            .map(str::to_owned)
    });
    assert!(error.contains("not a token"), "{error}");
    assert!(!error.contains("overflow"), "{error}");
    // A fault a person must fix: said at error level, and retried with back-off.
    a.wait_events(
        "redis refuses leasehold; backing off until it is fixed",
        1,
        Duration::from_secs(5),
    );
}

#[test]
fn a_holder_under_this_replicas_identity_is_said_once() {
    let redis = RedisServer::start();
    let lease = unique_lease("same-identity");
    let a = Replica::spawn(&redis.url(), &lease, "same", &FAST, &[]);
    wait_for("a to lead", Duration::from_secs(15), || {
        (a.leader()["is_leader"] == true).then_some(())
    });
    let b = Replica::spawn(&redis.url(), &lease, "same", &FAST, &[]);
    const SHARED: &str = "another process holds the lease under this replica's identity; give each replica its own --identity (the pod name)";
    b.wait_events(SHARED, 1, Duration::from_secs(15));
    wait_tries(&redis, 8);
    assert_eq!(b.events(SHARED).len(), 1, "{}", b.log_text());
    assert_eq!(b.events(SHARED)[0]["level"], "WARN");
    assert_eq!(a.leader()["is_leader"], true, "no overlap, no change");
}

/// Bytes that are no text in the lease's keys (a foreign writer's, a corruption) are shown as
/// well as they can be: `status` took the whole lease for an unreadable reply and exited 1, for
/// a clock note that is only for display, or a reservation.
#[test]
fn bytes_that_are_no_text_in_the_lease_keys_do_not_break_status() {
    let redis = RedisServer::start();
    let lease = unique_lease("no-text");
    let key = format!("leasehold:{{{lease}}}");
    let mut conn = redis.connection();
    for (suffix, value) in [
        (":clock", &b"\xff\xfe"[..]),
        (":reserved", &b"web-\xff"[..]),
        ("", &b"cron\xff#3"[..]),
    ] {
        redis::cmd("SET")
            .arg(format!("{key}{suffix}"))
            .arg(value)
            .arg("PX")
            .arg(60_000)
            .query::<()>(&mut conn)
            .unwrap();
    }
    let shown = lease_status(&redis.url(), &lease);
    assert!(shown.contains("cron"), "{shown}");
}

/// A foreign value shaped like a term (`cron-lock#12`) is no term of leasehold's: `status`
/// showed holder `cron-lock` with fencing token 12, and `remove-keys` named it one of our
/// replicas. Only an owner id (an identity and a UUID) before the `#` makes a term.
#[test]
fn a_foreign_value_shaped_like_a_term_has_no_token() {
    let redis = RedisServer::start();
    let lease = unique_lease("term-shaped");
    let key = format!("leasehold:{{{lease}}}");
    redis.cmd::<()>(&["SET", &key, "cron-lock#12", "PX", "60000"]);
    let shown = harness::replica::lease_status_json(&redis.url(), &lease).unwrap();
    assert_eq!(shown["holder"], "cron-lock#12", "{shown}");
    assert!(shown["token"].is_null(), "{shown}");
}

/// Numbers longer than any leasehold writes (16 digits) in `:longest` or the state record are
/// unreadable, as any foreign value there: the keys are written anew. A 20-digit claim made
/// every acquire win a term whose reply no client could read (Redis turns the number into
/// i64::MIN), so the lease looked held while nobody led, for ever; a 20-digit term deadline in
/// the record kept everyone out as a vanished term that never expires.
#[test]
fn numbers_too_long_to_be_leaseholds_in_its_records_are_foreign() {
    let redis = RedisServer::start();
    for (suffix, foreign) in [
        ("longest", "99999999999999999999 99999999999999999999 0"),
        // Sixteen digits, but above 2^53: a double rounds them, and `now + ms × 1000` overflowed.
        ("longest", "9300000000000000 9300000000000000 0"),
        (
            "state",
            "x/y 0 web-b-0b7c2b5e-6a4c-4a39-9a55-0d9b1b1f0c3e#7 99999999999999999999",
        ),
    ] {
        let lease = unique_lease("long-numbers");
        let key = format!("leasehold:{{{lease}}}:{suffix}");
        let _: () = redis.cmd(&["SET", &key, foreign]);
        let args: Vec<&str> = FAST
            .iter()
            .copied()
            .chain(["--no-data-loss-cooldown"])
            .collect();
        let a = Replica::spawn(&redis.url(), &lease, "a", &args, &[]);
        wait_for(
            &format!("a to lead past {suffix}"),
            Duration::from_secs(10),
            || a.is_ready().then_some(()),
        );
        let written: String = redis.cmd(&["GET", &key]);
        assert_ne!(written, foreign, "{suffix}");
    }
}

/// A claim in `:longest` of more than an hour, the most any leasehold grants, is foreign too.
/// Read as a lease duration, it made the data-loss cooldown end past 2^53 µs: the state record
/// written with it read back as missing, so every acquire found a new data loss, announced it
/// and woke every replica at once: about a thousand tries a second, and nobody led.
#[test]
fn a_longest_claim_beyond_an_hour_is_foreign() {
    let redis = RedisServer::start();
    let lease = unique_lease("longest-beyond");
    let key = format!("leasehold:{{{lease}}}:longest");
    let foreign = "7300000000000 0 0";
    let _: () = redis.cmd(&["SET", &key, foreign]);
    let a = Replica::spawn(&redis.url(), &lease, "a", &FAST, &[]);
    wait_for("a to lead past the claim", Duration::from_secs(10), || {
        a.is_ready().then_some(())
    });
    let written: String = redis.cmd(&["GET", &key]);
    assert_ne!(written, foreign);
}
