//! `leasehold::fence::postgres` and the psql recipe against a real PostgreSQL cluster.

use std::time::Duration;

use leasehold::fence::{self, FenceError};
use leasehold::lease::FencingToken;
use tokio_postgres::{Client, NoTls};

use super::docs::{run_sh, snippet};
use testbed::postgres::PostgresServer;
use testbed::wait::eventually;

pub async fn connect(server: &PostgresServer) -> Client {
    let (client, connection) = tokio_postgres::connect(&server.config(), NoTls)
        .await
        .expect("connect to the test postgres");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// The token table and the doc's example table.
pub async fn prepare(server: &PostgresServer) -> Client {
    let client = connect(server).await;
    fence::postgres::create_table(&client)
        .await
        .expect("create the token table");
    server.psql(&snippet("postgres-example-table"));
    client
}

/// The runs recorded, in the order the fence let them in (the id is drawn under its row lock).
pub fn runs(server: &PostgresServer) -> Vec<(String, u64)> {
    server
        .psql("SELECT leader, token FROM report_runs ORDER BY id")
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (leader, token) = l.split_once('|').expect("leader|token");
            (leader.to_owned(), token.parse().expect("a token"))
        })
        .collect()
}

// The recipe that docs/FENCING.md quotes.
async fn record_run(
    client: &mut Client,
    leader: &str,
    token: FencingToken,
) -> Result<(), FenceError> {
    let transaction = client.transaction().await?;
    // First: advance the resource's token, or refuse (then the dropped transaction rolls back).
    fence::postgres::advance(&transaction, "nightly-report", token).await?;
    transaction
        .execute(
            "INSERT INTO report_runs (leader, token) VALUES ($1, $2)",
            &[&leader, &(token.0 as i64)],
        )
        .await?;
    transaction.commit().await?;
    Ok(())
}

/// A caller that logs a stale refusal and carries on still commits nothing: the refusal aborts
/// the transaction, so its write fails and its commit rolls back.
#[tokio::test]
async fn a_transaction_that_carries_on_after_a_stale_advance_commits_nothing() {
    let server = PostgresServer::start();
    let mut client = prepare(&server).await;
    record_run(&mut client, "b", FencingToken(7))
        .await
        .expect("newer");
    let transaction = client.transaction().await.unwrap();
    let stale = fence::postgres::advance(&transaction, "nightly-report", FencingToken(6)).await;
    assert_eq!(stale_seen(stale), (7, 6));
    let insert = "INSERT INTO report_runs (leader, token) VALUES ('a', 6)";
    let _ignored = transaction.execute(insert, &[]).await;
    let _ignored = transaction.commit().await;
    assert_eq!(runs(&server), [("b".to_owned(), 7)]);
}

fn stale_seen(result: Result<(), FenceError>) -> (u64, u64) {
    match result {
        Err(FenceError::Stale { seen, offered, .. }) => (seen.0, offered.0),
        other => panic!("expected a stale refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn a_newer_token_writes_and_an_older_one_is_refused_leaving_nothing_behind() {
    let server = PostgresServer::start();
    let mut client = prepare(&server).await;
    let t = FencingToken;

    record_run(&mut client, "a", t(5))
        .await
        .expect("first write");
    record_run(&mut client, "b", t(7))
        .await
        .expect("newer token");
    record_run(&mut client, "b", t(7))
        .await
        .expect("the same term again");
    assert_eq!(stale_seen(record_run(&mut client, "a", t(6)).await), (7, 6));
    assert_eq!(
        runs(&server),
        [("a".into(), 5), ("b".into(), 7), ("b".into(), 7)]
    );
    assert_eq!(
        server.psql("SELECT token FROM leasehold_fence WHERE resource = 'nightly-report'"),
        "7"
    );
    // Nothing of the refused transaction is left: the dropped transaction's ROLLBACK goes out
    // before the client's next statement, and then no open transaction holds the row.
    client
        .simple_query("SELECT 1")
        .await
        .expect("the client works on");
    assert_eq!(
        server
            .psql("SELECT count(*) FROM pg_stat_activity WHERE state LIKE 'idle in transaction%'"),
        "0"
    );
}

#[tokio::test]
async fn a_token_beyond_bigint_is_refused_before_anything_is_sent() {
    let server = PostgresServer::start();
    let mut client = prepare(&server).await;
    let result = record_run(&mut client, "a", FencingToken(u64::MAX)).await;
    assert!(
        matches!(result, Err(FenceError::OutOfRange(FencingToken(u64::MAX)))),
        "{result:?}"
    );
    assert!(runs(&server).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_writers_with_interleaved_tokens_end_in_the_highests_state() {
    let server = PostgresServer::start();
    prepare(&server).await;
    let tokens = [4u64, 9, 2, 7, 5, 8, 1, 6];
    let mut clients = Vec::new();
    for _ in tokens {
        clients.push(connect(&server).await);
    }
    let start = std::sync::Arc::new(tokio::sync::Barrier::new(tokens.len()));
    let writers: Vec<_> = tokens
        .iter()
        .zip(clients)
        .map(|(&token, mut client)| {
            let start = start.clone();
            tokio::spawn(async move {
                start.wait().await;
                let mut outcomes = Vec::new();
                for _ in 0..10 {
                    let result =
                        record_run(&mut client, &format!("w{token}"), FencingToken(token)).await;
                    match result {
                        Ok(()) => outcomes.push(true),
                        Err(FenceError::Stale { seen, offered, .. }) => {
                            assert!(seen > offered, "refused {offered} for {seen}");
                            outcomes.push(false);
                        }
                        Err(other) => panic!("writer {token}: {other}"),
                    }
                }
                (token, outcomes)
            })
        })
        .collect();
    let mut refused = 0;
    for writer in writers {
        let (token, outcomes) = writer.await.expect("writer task");
        if token == 9 {
            assert!(
                outcomes.iter().all(|ok| *ok),
                "the highest is never refused"
            );
        }
        refused += outcomes.iter().filter(|ok| !**ok).count();
    }
    let runs = runs(&server);
    eprintln!("{} writes accepted, {refused} refused", runs.len());
    assert_eq!(runs.len() + refused, 80);
    assert!(
        runs.windows(2).all(|w| w[0].1 <= w[1].1),
        "an older token wrote after a newer one: {runs:?}"
    );
    assert_eq!(runs.last().map(|r| r.1), Some(9));
    assert_eq!(runs.iter().filter(|r| r.1 == 9).count(), 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_writer_holding_the_row_lock_delays_the_next_leader_only_until_its_session_times_out()
 {
    let server = PostgresServer::start();
    prepare(&server).await;
    let mut frozen = connect(&server).await;
    let mut next = connect(&server).await;
    frozen
        .batch_execute("SET idle_in_transaction_session_timeout = '500ms'")
        .await
        .expect("set the timeout");
    // The old leader advanced the row and then stopped, inside its transaction.
    let old = frozen.transaction().await.expect("begin");
    fence::postgres::advance(&old, "nightly-report", FencingToken(5))
        .await
        .expect("advance");
    old.execute(
        "INSERT INTO report_runs (leader, token) VALUES ('old', 5)",
        &[],
    )
    .await
    .expect("write");
    let waited = std::time::Instant::now();
    tokio::time::timeout(
        Duration::from_secs(10),
        record_run(&mut next, "new", FencingToken(6)),
    )
    .await
    .expect("the next leader gets through once the frozen session is cut off")
    .expect("the next leader writes");
    let waited = waited.elapsed();
    assert!(waited >= Duration::from_millis(400), "{waited:?}");
    assert!(old.commit().await.is_err(), "the frozen session was ended");
    assert_eq!(runs(&server), [("new".into(), 6)]);
}

/// A batch job in chunks, each its own fenced transaction: a newer leader's chunk stops the
/// older job at its next chunk.
async fn run_chunk(client: &mut Client, chunk: i32, token: FencingToken) -> Result<(), FenceError> {
    let transaction = client.transaction().await?;
    fence::postgres::advance(&transaction, "nightly-report", token).await?;
    transaction
        .execute(
            "INSERT INTO report_runs (leader, token) VALUES ($1, $2)",
            &[&format!("chunk-{chunk}"), &(token.0 as i64)],
        )
        .await?;
    transaction.commit().await?;
    Ok(())
}

#[tokio::test]
async fn a_batch_job_fenced_per_chunk_stops_at_its_first_chunk_after_a_newer_leaders() {
    let server = PostgresServer::start();
    let mut old = prepare(&server).await;
    let mut new = connect(&server).await;
    run_chunk(&mut old, 1, FencingToken(3))
        .await
        .expect("chunk 1");
    run_chunk(&mut old, 2, FencingToken(3))
        .await
        .expect("chunk 2");
    run_chunk(&mut new, 1, FencingToken(4))
        .await
        .expect("the new leader's chunk 1");
    assert_eq!(
        stale_seen(run_chunk(&mut old, 3, FencingToken(3)).await),
        (4, 3)
    );
    assert_eq!(
        runs(&server),
        [
            ("chunk-1".into(), 3),
            ("chunk-2".into(), 3),
            ("chunk-1".into(), 4)
        ]
    );
}

// The migration recipe that docs/FENCING.md quotes: DDL is transactional in PostgreSQL.
async fn migrate(client: &mut Client, token: FencingToken) -> Result<(), FenceError> {
    let transaction = client.transaction().await?;
    fence::postgres::advance(&transaction, "schema", token).await?;
    transaction
        .batch_execute(
            "ALTER TABLE report_runs ADD COLUMN IF NOT EXISTS finished_at timestamptz;
             CREATE INDEX IF NOT EXISTS report_runs_finished ON report_runs (finished_at);",
        )
        .await?;
    transaction.commit().await?;
    Ok(())
}

#[tokio::test]
async fn a_fenced_migration_with_a_stale_token_changes_no_schema() {
    let server = PostgresServer::start();
    let mut client = prepare(&server).await;
    let column = "SELECT count(*) FROM information_schema.columns \
                  WHERE table_name = 'report_runs' AND column_name = 'finished_at'";
    // A newer leader already touched the schema resource.
    fence::postgres::create_table(&client).await.expect("table");
    server.psql("INSERT INTO leasehold_fence VALUES ('schema', 8)");
    let refused = migrate(&mut client, FencingToken(7)).await;
    assert!(
        matches!(refused, Err(FenceError::Stale { .. })),
        "{refused:?}"
    );
    assert_eq!(server.psql(column), "0");
    migrate(&mut client, FencingToken(8))
        .await
        .expect("migrate");
    assert_eq!(server.psql(column), "1");
}

/// The advance statement as postgres.sql has it (psql's variables).
fn advance_section() -> String {
    let body: Vec<&str> = fence::postgres::SQL
        .lines()
        .skip_while(|l| l.trim() != "-- name: advance")
        .skip(1)
        .take_while(|l| !l.starts_with("-- name:"))
        .collect();
    body.join("\n").trim().to_owned()
}

/// Runs the doc's psql recipe as `leader` with `token`.
pub fn psql_write(server: &PostgresServer, leader: &str, token: u64) -> std::process::Output {
    let dir = tempfile::tempdir().expect("temp dir");
    let token = token.to_string();
    run_sh(
        &snippet("psql-write"),
        dir.path(),
        &[
            ("DATABASE_URL", &server.url()),
            ("LEASEHOLD_FENCING_TOKEN", &token),
            ("LEASEHOLD_IDENTITY", leader),
        ],
    )
}

#[tokio::test]
async fn the_psql_recipe_writes_with_a_newer_token_and_fails_with_a_stale_one() {
    assert!(
        snippet("psql-write").contains(&advance_section()),
        "the psql recipe carries postgres.sql's advance statement as it stands"
    );
    let server = PostgresServer::start();
    prepare(&server).await;
    for (leader, token) in [("a", 5), ("b", 7)] {
        let out = psql_write(&server, leader, token);
        assert!(
            out.status.success(),
            "{leader} {token}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let stale = psql_write(&server, "a", 6);
    let stderr = String::from_utf8_lossy(&stale.stderr);
    assert_eq!(stale.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("stale fencing token"), "{stderr}");
    assert_eq!(runs(&server), [("a".into(), 5), ("b".into(), 7)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_repeatable_read_a_writer_that_waited_on_a_concurrent_one_fails_to_serialize() {
    let server = PostgresServer::start();
    let mut first = prepare(&server).await;
    let mut second = connect(&server).await;
    server.psql("INSERT INTO leasehold_fence VALUES ('nightly-report', 1)");
    let older = first
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .start()
        .await
        .expect("begin");
    fence::postgres::advance(&older, "nightly-report", FencingToken(6))
        .await
        .expect("advance");
    let waiting = tokio::spawn(async move {
        let newer = second
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .start()
            .await
            .expect("begin");
        fence::postgres::advance(&newer, "nightly-report", FencingToken(7)).await
    });
    eventually(
        "the second writer to wait for the row lock",
        Duration::from_secs(10),
        || async {
            let waiting = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'";
            (server.psql(waiting) == "1").then_some(())
        },
    )
    .await;
    older.commit().await.expect("commit");
    let result = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the waiting writer wakes")
        .expect("task");
    match result {
        Err(FenceError::Postgres(err)) => assert_eq!(
            err.code(),
            Some(&tokio_postgres::error::SqlState::T_R_SERIALIZATION_FAILURE),
            "{err}"
        ),
        other => panic!("expected a serialization failure, got {other:?}"),
    }
}
