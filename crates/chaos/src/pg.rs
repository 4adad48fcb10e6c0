//! PostgreSQL, the second fenced resource, as the checker reads it: a row of the harness's
//! tables. The server is the test kit's (`testbed::postgres`); the command's transaction and
//! reading the tables back are in `pgwrite.rs`.

use serde::{Deserialize, Serialize};

use crate::time::Micros;

/// A row of `chaos_writes` (or of `chaos_refused`, with `role` empty): a committed write.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PgWrite {
    /// Commit order (the fence row's lock orders fenced transactions).
    pub id: i64,
    /// When the transaction inserted it (server clock, the same machine's).
    pub at: Micros,
    /// Its token.
    pub token: u64,
    /// The replica.
    pub identity: String,
    /// The writing process.
    pub pid: u32,
    /// Its write counter.
    pub seq: u64,
    /// `c` (command), `d` (daemon), `s` (stubborn worker).
    pub role: String,
}
