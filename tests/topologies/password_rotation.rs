//! A rotated Redis password: the password file (a mounted Secret that Kubernetes updates in
//! place) is read again when Redis refuses the password, so a running replica follows the
//! rotation without a restart, and never logs either password.

use std::time::Duration;

use harness::contenders::unique_lease;
use harness::replica::{FAST, Replica};
use testbed::redis_server::RedisServer;
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
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("password");
    std::fs::write(&file, format!("{BEFORE}\n")).expect("write the password file");
    let file_arg = file.display().to_string();
    let mut args = FAST.to_vec();
    args.extend([
        "--no-data-loss-cooldown",
        "--redis-password-file",
        &file_arg,
    ]);
    let a = Replica::spawn(&redis.url(), &unique_lease("rotation"), "a", &args, &[]);
    wait_for("the replica to lead", Duration::from_secs(10), || {
        a.is_ready().then_some(())
    });

    // The rotation: the Secret's file first (the kubelet updates it in place), Redis's password,
    // then every connection dropped, so that only a new dial can renew the lease.
    std::fs::write(&file, format!("{AFTER}\n")).expect("rewrite the password file");
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg(AFTER)
        .query(&mut admin)
        .expect("CONFIG SET requirepass");
    let renewed = |a: &Replica| {
        a.metric("leasehold_renewals_total{result=\"renewed\"}")
            .unwrap_or(0.0)
    };
    let before = renewed(&a);
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .query(&mut admin)
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
}
