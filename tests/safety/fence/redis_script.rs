//! `leasehold::fence::redis` and the redis-cli recipe against real redis-server processes.

use leasehold::fence::FenceError;
use leasehold::fence::redis::{FencedWrite, LUA};
use leasehold::lease::FencingToken;
use redis::aio::MultiplexedConnection;

use super::docs::{run_sh, snippet};
use testbed::cluster::RedisCluster;
use testbed::redis_server::RedisServer;

pub async fn connect(url: &str) -> MultiplexedConnection {
    redis::Client::open(url)
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect to the test redis")
}

// The recipe that docs/FENCING.md quotes.
async fn record_run(
    conn: &mut MultiplexedConnection,
    leader: &str,
    token: FencingToken,
) -> Result<(), FenceError> {
    let mut push = redis::cmd("RPUSH");
    push.arg("report:{nightly}:runs")
        .arg(format!("{leader} {token}"));
    FencedWrite::new("report:{nightly}:fence", &push)
        .touching("report:{nightly}:runs")
        .run(conn, token)
        .await?;
    Ok(())
}

pub fn runs(redis: &RedisServer) -> Vec<(String, u64)> {
    let lines: Vec<String> = redis.cmd(&["LRANGE", "report:{nightly}:runs", "0", "-1"]);
    lines
        .iter()
        .map(|l| {
            let (leader, token) = l.split_once(' ').expect("leader token");
            (leader.to_owned(), token.parse().expect("a token"))
        })
        .collect()
}

#[tokio::test]
async fn a_newer_token_writes_and_an_older_one_is_refused_leaving_nothing_behind() {
    let redis = RedisServer::start();
    let mut conn = connect(&redis.url()).await;
    let t = FencingToken;
    record_run(&mut conn, "a", t(5)).await.expect("first write");
    record_run(&mut conn, "b", t(7)).await.expect("newer token");
    record_run(&mut conn, "b", t(7))
        .await
        .expect("the same term again");
    match record_run(&mut conn, "a", t(6)).await {
        Err(FenceError::Stale {
            resource,
            seen,
            offered,
        }) => {
            assert_eq!(
                (resource.as_str(), seen, offered),
                ("report:{nightly}:fence", t(7), t(6))
            );
        }
        other => panic!("expected a stale refusal, got {other:?}"),
    }
    assert_eq!(
        runs(&redis),
        [("a".into(), 5), ("b".into(), 7), ("b".into(), 7)]
    );
    let stored: String = redis.cmd(&["GET", "report:{nightly}:fence"]);
    assert_eq!(stored, "7");
}

#[tokio::test]
async fn tokens_compare_as_numbers_beyond_what_lua_numbers_hold_exactly() {
    let redis = RedisServer::start();
    let mut conn = connect(&redis.url()).await;
    let high = u64::MAX - 1;
    record_run(&mut conn, "a", FencingToken(high))
        .await
        .expect("write");
    // 2^64 - 2 and 2^64 - 1 are the same Lua number; as digits they differ.
    record_run(&mut conn, "b", FencingToken(u64::MAX))
        .await
        .expect("newer");
    let refused = record_run(&mut conn, "a", FencingToken(high)).await;
    assert!(
        matches!(refused, Err(FenceError::Stale { .. })),
        "{refused:?}"
    );
    assert_eq!(runs(&redis).len(), 2);
}

/// Digit strings of different lengths: a string comparison alone would take 9 for newer than
/// 10, and 99 for newer than 100.
#[tokio::test]
async fn a_token_with_more_digits_is_newer_whatever_its_first_digit() {
    let redis = RedisServer::start();
    let mut conn = connect(&redis.url()).await;
    let t = FencingToken;
    for (newer, older) in [(10, 9), (100, 99)] {
        record_run(&mut conn, "a", t(newer)).await.expect("newer");
        let refused = record_run(&mut conn, "b", t(older)).await;
        assert!(
            matches!(refused, Err(FenceError::Stale { .. })),
            "{refused:?}"
        );
    }
    assert_eq!(runs(&redis), [("a".into(), 10), ("a".into(), 100)]);
}

/// The script as redis-cli calls it: leading zeros are the same token, and a token longer than
/// any 64-bit number is refused before it is stored (stored, it would refuse every real token),
/// and is no token when it is found stored.
#[tokio::test]
async fn the_script_reads_leading_zeros_and_refuses_a_token_past_64_bits() {
    let redis = RedisServer::start();
    let fenced = |token: &str| {
        redis.try_cmd::<String>(&[
            "EVAL", LUA, "2", "f:{r}", "v:{r}", token, "SET", "v:{r}", token,
        ])
    };
    assert_eq!(fenced("007").as_deref(), Ok("OK"));
    assert_eq!(redis.cmd::<String>(&["GET", "f:{r}"]), "7");
    assert_eq!(
        fenced("0000007").as_deref(),
        Ok("OK"),
        "the same term again"
    );
    let stale = fenced("6").expect_err("an older token");
    assert!(
        stale.contains("STALE") && stale.contains("seen=7 offered=6"),
        "{stale}"
    );
    for too_long in ["18446744073709551616", "123456789012345678901"] {
        let refused = fenced(too_long).expect_err("a token past 64 bits");
        assert!(
            refused.contains("past what 64 bits hold"),
            "{too_long}: {refused}"
        );
    }
    assert_eq!(
        fenced("18446744073709551615").as_deref(),
        Ok("OK"),
        "u64::MAX"
    );
    assert_eq!(
        redis.cmd::<String>(&["GET", "f:{r}"]),
        "18446744073709551615"
    );
    // A stored value past 64 bits was written by someone else: an error that says so, not a
    // STALE that would refuse every token for ever.
    redis.cmd::<String>(&["SET", "f:{r}", "123456789012345678901"]);
    let foreign = fenced("5").expect_err("a stored value past 64 bits");
    assert!(
        foreign.contains("does not hold a fencing token"),
        "{foreign}"
    );
}

#[tokio::test]
async fn a_write_that_fails_does_not_advance_the_token() {
    let redis = RedisServer::start();
    let mut conn = connect(&redis.url()).await;
    redis.cmd::<String>(&["SET", "report:{nightly}:state", "a string"]);
    let mut push = redis::cmd("RPUSH");
    push.arg("report:{nightly}:state").arg("x");
    let wrong_type = FencedWrite::new("report:{nightly}:fence", &push)
        .touching("report:{nightly}:state")
        .run(&mut conn, FencingToken(9))
        .await;
    assert!(
        matches!(wrong_type, Err(FenceError::Redis(_))),
        "{wrong_type:?}"
    );
    let stored: Option<String> = redis.cmd(&["GET", "report:{nightly}:fence"]);
    assert_eq!(stored, None);
    record_run(&mut conn, "a", FencingToken(3))
        .await
        .expect("a lower token still writes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_writers_with_interleaved_tokens_end_in_the_highests_state() {
    let redis = RedisServer::start();
    let tokens = [4u64, 9, 2, 7, 5, 8, 1, 6];
    let start = std::sync::Arc::new(tokio::sync::Barrier::new(tokens.len()));
    let mut writers = Vec::new();
    for token in tokens {
        let mut conn = connect(&redis.url()).await;
        let start = start.clone();
        writers.push(tokio::spawn(async move {
            start.wait().await;
            let mut refused = 0;
            for _ in 0..20 {
                match record_run(&mut conn, &format!("w{token}"), FencingToken(token)).await {
                    Ok(()) => {}
                    Err(FenceError::Stale { seen, offered, .. }) => {
                        assert!(seen > offered);
                        refused += 1;
                    }
                    Err(other) => panic!("writer {token}: {other}"),
                }
                tokio::task::yield_now().await;
            }
            (token, refused)
        }));
    }
    let mut refused = 0;
    for writer in writers {
        let (token, n) = writer.await.expect("writer task");
        if token == 9 {
            assert_eq!(n, 0, "the highest is never refused");
        }
        refused += n;
    }
    let runs = runs(&redis);
    eprintln!("{} writes accepted, {refused} refused", runs.len());
    assert_eq!(runs.len() + refused, 160);
    assert!(
        runs.windows(2).all(|w| w[0].1 <= w[1].1),
        "an older token wrote after a newer one: {runs:?}"
    );
    assert_eq!(runs.last().map(|r| r.1), Some(9));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_the_keys_share_the_hash_tag_and_untagged_ones_are_refused() {
    let cluster = RedisCluster::start();
    let urls: Vec<String> = cluster.nodes.iter().map(|n| n.url()).collect();
    let client = redis::cluster::ClusterClient::new(urls).expect("cluster client");
    let mut conn = client
        .get_async_connection()
        .await
        .expect("cluster connection");
    let mut set = redis::cmd("SET");
    set.arg("report:{nightly}:state").arg("done");
    let write = FencedWrite::new("report:{nightly}:fence", &set).touching("report:{nightly}:state");
    write
        .run(&mut conn, FencingToken(5))
        .await
        .expect("tagged write");
    let refused = write.run(&mut conn, FencingToken(4)).await;
    assert!(
        matches!(refused, Err(FenceError::Stale { .. })),
        "{refused:?}"
    );
    let stored: String = redis::cmd("GET")
        .arg("report:{nightly}:state")
        .query_async(&mut conn)
        .await
        .expect("GET");
    assert_eq!(stored, "done");

    // Without a common hash tag the keys fall in different slots: RedisCluster refuses the script.
    let mut untagged = redis::cmd("SET");
    untagged.arg("report-state").arg("done");
    let cross = FencedWrite::new("report-fence", &untagged)
        .touching("report-state")
        .run(&mut conn, FencingToken(5))
        .await;
    match cross {
        Err(FenceError::Redis(err)) => assert_eq!(err.code(), Some("CROSSSLOT"), "{err}"),
        other => panic!("expected CROSSSLOT, got {other:?}"),
    }
}

/// Runs the doc's redis-cli recipe as `leader` with `token`, with the script saved as fence.lua.
pub fn redis_cli_write(url: &str, leader: &str, token: u64) -> std::process::Output {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("fence.lua"), LUA).expect("write fence.lua");
    let token = token.to_string();
    run_sh(
        &snippet("redis-cli-write"),
        dir.path(),
        &[
            ("REDIS_URL", url),
            ("LEASEHOLD_FENCING_TOKEN", &token),
            ("LEASEHOLD_IDENTITY", leader),
        ],
    )
}

#[test]
fn the_redis_cli_recipe_writes_with_a_newer_token_and_fails_with_a_stale_one() {
    let redis = RedisServer::start();
    for (leader, token) in [("a", 5), ("b", 7)] {
        let out = redis_cli_write(&redis.url(), leader, token);
        assert!(
            out.status.success(),
            "{leader} {token}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let stale = redis_cli_write(&redis.url(), "a", 6);
    let output = format!(
        "{}{}",
        String::from_utf8_lossy(&stale.stdout),
        String::from_utf8_lossy(&stale.stderr)
    );
    assert_eq!(stale.status.code(), Some(1), "{output}");
    assert!(output.contains("STALE seen=7 offered=6"), "{output}");
    assert_eq!(runs(&redis), [("a".into(), 5), ("b".into(), 7)]);
}
