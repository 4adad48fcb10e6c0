//! Fencing in PostgreSQL (feature `fence-postgres`, on tokio-postgres): a token table with one
//! row per fenced resource, advanced in the write's own transaction, first.
//!
//! ```no_run
//! # async fn demo(client: &mut tokio_postgres::Client, token: leasehold::lease::FencingToken)
//! # -> Result<(), leasehold::fence::FenceError> {
//! use leasehold::fence::postgres;
//!
//! postgres::create_table(&*client).await?; // once
//! let transaction = client.transaction().await?;
//! postgres::advance(&transaction, "nightly-report", token).await?; // Stale: dropped, rolled back
//! transaction.execute("UPDATE report SET done = now()", &[]).await?;
//! transaction.commit().await?;
//! # Ok(())
//! # }
//! ```
//!
//! The row lock that the advance takes is held until the transaction ends, so fenced
//! transactions on one resource run one after the other, in token order once a newer token has
//! written: READ COMMITTED is enough (docs/FENCING.md says why).

use std::sync::LazyLock;

use tokio_postgres::{GenericClient, Transaction};

use super::FenceError;
use crate::lease::FencingToken;

/// The statements, once: `src/fence/postgres.sql`, which docs/FENCING.md quotes.
pub const SQL: &str = include_str!("postgres.sql");

/// `CREATE TABLE IF NOT EXISTS leasehold_fence …`.
pub static SCHEMA: LazyLock<String> = LazyLock::new(|| section(SQL, "schema"));
/// The advance, with `$1` the resource and `$2` the token.
pub static ADVANCE: LazyLock<String> = LazyLock::new(|| bind(&section(SQL, "advance")));
/// The token the resource has seen, with `$1` the resource.
pub static SEEN: LazyLock<String> = LazyLock::new(|| bind(&section(SQL, "seen")));
/// Aborts the transaction of a stale token.
pub static REFUSE: LazyLock<String> = LazyLock::new(|| section(SQL, "refuse"));

/// The statement after the `-- name: <name>` line, up to the next such line ("" if missing;
/// the unit tests make sure none is).
fn section(sql: &str, name: &str) -> String {
    let marker = format!("-- name: {name}");
    let mut lines = sql.lines().skip_while(|line| line.trim() != marker);
    if lines.next().is_none() {
        return String::new();
    }
    let body: Vec<&str> = lines
        .take_while(|line| !line.starts_with("-- name:"))
        .collect();
    body.join("\n").trim().to_owned()
}

/// psql's variables to the wire protocol's parameters.
fn bind(statement: &str) -> String {
    statement
        .replace(":'resource'", "$1")
        .replace(":token", "$2")
}

/// Creates the token table if it does not exist.
pub async fn create_table(client: &impl GenericClient) -> Result<(), FenceError> {
    client.batch_execute(&SCHEMA).await?;
    Ok(())
}

/// Advances `resource`'s row to `token` unless the row holds a higher one, as the first
/// statement of `transaction`; then do the write in the same transaction. A stale token gets
/// [`FenceError::Stale`], has changed nothing, and has aborted the transaction: drop it (it
/// rolls back; its writes and its commit would fail).
pub async fn advance(
    transaction: &Transaction<'_>,
    resource: &str,
    token: FencingToken,
) -> Result<(), FenceError> {
    let offered = i64::try_from(token.0).map_err(|_| FenceError::OutOfRange(token))?;
    let advanced = transaction
        .execute(ADVANCE.as_str(), &[&resource, &offered])
        .await?;
    if advanced == 1 {
        return Ok(());
    }
    // Zero rows: the row holds a higher token. In READ COMMITTED this statement sees the
    // latest committed value, the one that refused us or a later one.
    let seen = transaction
        .query_one(SEEN.as_str(), &[&resource])
        .await
        .and_then(|row| row.try_get::<_, Option<i64>>(0));
    // The transaction is aborted too, whatever that read found: one that carried on regardless
    // would have its writes fail and its commit rolled back. (This statement's error is the
    // point, not news.)
    let _aborted = transaction.batch_execute(REFUSE.as_str()).await;
    let seen = seen?.and_then(|seen| u64::try_from(seen).ok()).unwrap_or(0);
    Err(FenceError::Stale {
        resource: resource.to_owned(),
        seen: FencingToken(seen),
        offered: token,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_statement_is_found_in_the_sql_file() {
        assert!(SCHEMA.starts_with("CREATE TABLE IF NOT EXISTS leasehold_fence"));
        assert!(ADVANCE.starts_with("INSERT INTO leasehold_fence"));
        assert!(SEEN.starts_with("SELECT token FROM leasehold_fence"));
        assert!(REFUSE.starts_with("DO $$ BEGIN RAISE EXCEPTION"));
    }

    #[test]
    fn the_statements_bind_parameters_where_psql_has_variables() {
        assert!(ADVANCE.contains("VALUES ($1, $2)"), "{}", *ADVANCE);
        assert!(ADVANCE.contains("WHERE f.token <= EXCLUDED.token"));
        assert!(!ADVANCE.contains(':'), "{}", *ADVANCE);
        assert!(SEEN.ends_with("WHERE resource = $1;"), "{}", *SEEN);
    }

    #[test]
    fn a_missing_section_is_empty() {
        assert_eq!(section(SQL, "nothing"), "");
        assert_eq!(section("-- name: a\nx\n-- name: b\ny", "a"), "x");
    }
}
