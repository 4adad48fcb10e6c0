//! Fencing in Redis (feature `fence-redis`): one Lua script compares the write's token with the
//! resource's token key, performs the write and advances the key, atomically. The resource can
//! live in the lease's Redis or in another one.
//!
//! ```no_run
//! # async fn demo(conn: &mut redis::aio::MultiplexedConnection, token: leasehold::lease::FencingToken)
//! # -> Result<(), leasehold::fence::FenceError> {
//! use leasehold::fence::redis::FencedWrite;
//!
//! let mut set = redis::cmd("SET");
//! set.arg("report:{nightly}:state").arg("done");
//! let write = FencedWrite::new("report:{nightly}:fence", &set).touching("report:{nightly}:state");
//! write.run(conn, token).await?; // Stale: nothing was written
//! # Ok(())
//! # }
//! ```

use std::sync::LazyLock;

use ::redis::aio::ConnectionLike;
use ::redis::{Arg, Cmd, RedisError, Script, Value};

use super::FenceError;
use crate::lease::FencingToken;

/// The script, once: `src/fence/redis.lua`, which docs/FENCING.md quotes.
pub const LUA: &str = include_str!("redis.lua");

static SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(LUA));

/// One write fenced by the token kept in `token_key`.
#[derive(Debug, Clone)]
pub struct FencedWrite {
    token_key: String,
    keys: Vec<String>,
    command: Vec<Vec<u8>>,
}

impl FencedWrite {
    /// `command` (for example `SET key value`) fenced by `token_key`.
    pub fn new(token_key: impl Into<String>, command: &Cmd) -> Self {
        let command = command
            .args_iter()
            .filter_map(|arg| match arg {
                Arg::Simple(bytes) => Some(bytes.to_vec()),
                _ => None,
            })
            .collect();
        Self {
            token_key: token_key.into(),
            keys: Vec::new(),
            command,
        }
    }

    /// Declares a key that the command touches. Redis wants every key a script touches passed
    /// as a key; on a Cluster they must all share the token key's hash tag (`{…}`).
    pub fn touching(mut self, key: impl Into<String>) -> Self {
        self.keys.push(key.into());
        self
    }

    /// Runs the write with `token`: the command's reply, or [`FenceError::Stale`] when the
    /// token key holds a higher token, in which case nothing was written.
    pub async fn run<C: ConnectionLike>(
        &self,
        conn: &mut C,
        token: FencingToken,
    ) -> Result<Value, FenceError> {
        let mut invocation = SCRIPT.key(&self.token_key);
        for key in &self.keys {
            invocation.key(key);
        }
        invocation.arg(token.0);
        for arg in &self.command {
            invocation.arg(arg.as_slice());
        }
        invocation
            .invoke_async(conn)
            .await
            .map_err(|err| self.refusal(err, token))
    }

    fn refusal(&self, err: RedisError, offered: FencingToken) -> FenceError {
        match stale_seen(&err) {
            Some(seen) => FenceError::Stale {
                resource: self.token_key.clone(),
                seen,
                offered,
            },
            None => FenceError::Redis(err),
        }
    }
}

/// The token in the script's `STALE seen=<n> offered=<m>` error, if that is what `err` is.
fn stale_seen(err: &RedisError) -> Option<FencingToken> {
    if err.code() != Some("STALE") {
        return None;
    }
    parse_seen(err.detail()?)
}

fn parse_seen(detail: &str) -> Option<FencingToken> {
    detail
        .split_whitespace()
        .find_map(|word| word.strip_prefix("seen="))
        .and_then(|digits| digits.parse().ok())
        .map(FencingToken)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stale_reply_names_the_token_seen() {
        assert_eq!(parse_seen("seen=17 offered=4"), Some(FencingToken(17)));
        assert_eq!(parse_seen("offered=4"), None);
        assert_eq!(parse_seen("seen=x offered=4"), None);
    }

    #[test]
    fn the_command_becomes_the_scripts_arguments() {
        let mut set = ::redis::cmd("SET");
        set.arg("k").arg(7);
        let write = FencedWrite::new("t", &set).touching("k");
        assert_eq!(
            write.command,
            vec![b"SET".to_vec(), b"k".to_vec(), b"7".to_vec()]
        );
        assert_eq!(write.keys, vec!["k".to_owned()]);
    }
}
