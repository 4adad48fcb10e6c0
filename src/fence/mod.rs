//! Fencing for the resources the leader's work writes to: each write carries the term's fencing
//! token, and the resource refuses a token lower than the highest it has seen, in the same
//! atomic step as the write. This closes what `Leadership::check()` cannot: a pause between the
//! check and the write. docs/FENCING.md has the recipes; the statements and scripts they quote
//! live here, once.
//!
//! - `k8s` (feature `kubernetes`, on by default): Kubernetes objects, a token annotation
//!   written with a resourceVersion precondition.
//! - `postgres` (feature `fence-postgres`): a token table advanced in the write's transaction.
//! - `redis` (feature `fence-redis`): a Lua script that compares, writes and advances at once.

#[cfg(feature = "kubernetes")]
pub mod k8s;
#[cfg(feature = "fence-postgres")]
pub mod postgres;
#[cfg(feature = "fence-redis")]
pub mod redis;

use crate::elector::NotLeader;
use crate::lease::FencingToken;

/// Why a fenced write did not happen.
#[derive(Debug, thiserror::Error)]
pub enum FenceError {
    /// The resource has seen a higher token: a newer leader wrote. Nothing was written; do not
    /// retry with this token.
    #[error(
        "stale fencing token for `{resource}`: offered {offered}, but the resource has seen {seen}"
    )]
    Stale {
        /// The fenced resource.
        resource: String,
        /// The highest token the resource has seen.
        seen: FencingToken,
        /// The token of this write.
        offered: FencingToken,
    },
    /// The token does not fit the resource's representation (PostgreSQL's `bigint`).
    #[error("fencing token {0} does not fit a signed 64-bit integer")]
    OutOfRange(FencingToken),
    /// The resource's stored token is not a decimal number (someone else wrote it).
    #[error("the fencing token stored for `{resource}` is not a decimal number: {stored:?}")]
    Unreadable {
        /// The fenced resource.
        resource: String,
        /// What is stored.
        stored: String,
    },
    /// The object changed between the read and the write (HTTP 409 on its resourceVersion):
    /// read again, and the stored token decides.
    #[error("`{resource}` changed while this write was prepared; read it again")]
    Conflict {
        /// The object.
        resource: String,
    },
    /// `Leadership::check` refused before the write was sent.
    #[error(transparent)]
    NotLeader(#[from] NotLeader),
    /// A Kubernetes API call failed.
    #[cfg(feature = "kubernetes")]
    #[error("kubernetes API: {0}")]
    Kubernetes(#[source] kube::Error),
    /// A PostgreSQL call failed.
    #[cfg(feature = "fence-postgres")]
    #[error("postgres: {0}")]
    Postgres(#[from] tokio_postgres::Error),
    /// A Redis call failed.
    #[cfg(feature = "fence-redis")]
    #[error("redis: {0}")]
    Redis(#[source] ::redis::RedisError),
}

/// Whether `offered` may write to a resource that has seen `seen`: not lower. Equal passes, so
/// that one term writes as often as it likes.
pub fn admits(seen: Option<FencingToken>, offered: FencingToken) -> bool {
    seen.is_none_or(|seen| offered >= seen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_admitted_unless_a_higher_one_was_seen() {
        let t = FencingToken;
        let rows = [
            (None, t(1), true),
            (Some(t(5)), t(6), true),
            (Some(t(5)), t(5), true),
            (Some(t(5)), t(4), false),
            (Some(t(u64::MAX)), t(u64::MAX - 1), false),
        ];
        for (seen, offered, want) in rows {
            assert_eq!(
                admits(seen, offered),
                want,
                "seen {seen:?} offered {offered}"
            );
        }
    }
}
