//! A rotated Redis password: the password file (a mounted Secret that Kubernetes updates in
//! place) is read again when Redis refuses the password, so a running replica follows the
//! rotation without a restart, and never logs either password; on one Redis and through
//! Sentinel.

use std::time::Duration;

use harness::contenders::unique_lease;
use harness::replica::{FAST, Replica};
use testbed::redis_server::RedisServer;
use testbed::sentinel::SentinelSet;
use testbed::wait::wait_for;

const BEFORE: &str = "pw-before-rotation-7f3a";
const AFTER: &str = "pw-after-rotation-9c1e";

#[test]
fn a_rotated_password_file_is_read_again_without_a_restart() {
    let redis = RedisServer::builder()
        .args(["--requirepass", BEFORE])
        .start();
    // The admin connection, authenticated before the rotation, outlives it (and `CLIENT KILL`
    // skips the connection that sends it).
    let mut admin = redis.connection();
    follows_a_rotation(
        &redis.url(),
        &["--no-data-loss-cooldown"],
        &mut admin,
        &["CONFIG", "SET", "requirepass", AFTER],
        &["CLIENT", "KILL", "TYPE", "normal"],
    );
}

/// Through Sentinel: the password is the master's ACL user's (the Sentinels log in as the
/// default user), and a dial that the master refuses reads the file again too.
#[test]
fn a_rotated_password_file_is_read_again_through_sentinel() {
    follows_a_rotation_through_sentinel(&[0, 1, 2], &[]);
}

/// Through Sentinel, what the replica learnt of the Sentinels outlives the rotation: an unsafe
/// count of them (two named, accepted by the flag) is said once, not again at the first dial
/// with the new password.
#[test]
fn a_rotation_through_sentinel_keeps_what_was_learnt_of_the_sentinels() {
    let a = follows_a_rotation_through_sentinel(&[0, 1], &["--allow-unsafe-sentinel-count"]);
    let said = a.events("an unsafe number of Sentinels is accepted");
    assert_eq!(said.len(), 1, "said once: {said:?}");
}

/// [`follows_a_rotation`] through the Sentinels `sentinels` names (indexes of three), with
/// `extra` arguments, for the master's ACL user `app`.
fn follows_a_rotation_through_sentinel(sentinels: &[usize], extra: &[&str]) -> Replica {
    let password = format!(">{BEFORE}");
    let set = SentinelSet::start_with_master_args(&[
        "--user", "app", "on", &password, "~*", "&*", "+@all",
    ]);
    let mut admin = set.master.connection();
    let reset = format!(">{AFTER}");
    let mut args = vec!["--redis-username", "app"];
    args.extend(extra);
    follows_a_rotation(
        &set.url_in_order(sentinels),
        &args,
        &mut admin,
        &["ACL", "SETUSER", "app", "resetpass", &reset],
        &["CLIENT", "KILL", "USER", "app"],
    )
}

/// A replica on `url` (with `extra` arguments) whose password comes from a file leads; then the
/// rotation: the Secret's file first (the kubelet updates it in place), Redis's password
/// (`rotate`, sent on `admin`), then leasehold's connections dropped (`kill`), so that only a
/// new dial can renew the lease. The same process leads again, and neither password is logged.
/// Returns the replica, still leading.
fn follows_a_rotation(
    url: &str,
    extra: &[&str],
    admin: &mut redis::Connection,
    rotate: &[&str],
    kill: &[&str],
) -> Replica {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("password");
    std::fs::write(&file, format!("{BEFORE}\n")).expect("write the password file");
    let file_arg = file.display().to_string();
    let mut args = FAST.to_vec();
    args.extend(["--redis-password-file", &file_arg]);
    args.extend(extra);
    let a = Replica::spawn(url, &unique_lease("rotation"), "a", &args, &[]);
    wait_for("the replica to lead", Duration::from_secs(10), || {
        a.is_ready().then_some(())
    });

    std::fs::write(&file, format!("{AFTER}\n")).expect("rewrite the password file");
    let _: () = redis::cmd(rotate[0])
        .arg(&rotate[1..])
        .query(admin)
        .expect("change the password");
    let renewed = |a: &Replica| {
        a.metric("leasehold_renewals_total{result=\"renewed\"}")
            .unwrap_or(0.0)
    };
    let before = renewed(&a);
    let killed: i64 = redis::cmd(kill[0])
        .arg(&kill[1..])
        .query(admin)
        .expect("CLIENT KILL");
    assert!(killed >= 1, "leasehold's connections were dropped");

    // Renewals resume on a connection made with the new password, within the renew deadline or
    // after a new term: either way the same process leads again.
    wait_for(
        "renewals with the new password",
        Duration::from_secs(10),
        || (renewed(&a) > before && a.is_ready()).then_some(()),
    );
    a.wait_events(
        "read the Redis password file again: it holds a new password",
        1,
        Duration::from_secs(5),
    );
    let log = a.log_text();
    assert!(
        !log.contains(BEFORE) && !log.contains(AFTER),
        "a password was logged:\n{log}"
    );
    a
}
