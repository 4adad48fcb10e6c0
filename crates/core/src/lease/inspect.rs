//! What a lease asks Redis outside its scripts: an `INFO` section of the lease's node (the
//! product reads the eviction policy with it), and after a script ran into a key of the wrong
//! type, which key that is.

use std::time::Duration;

use redis::Value;

use super::connection::Live;
use super::reply::{protocol, text};
use super::{LeaseError, RedisLease};

/// The value of field `name` in the text of an `INFO` reply (`role` in `role:master`), if it
/// has one: the one reader of INFO's `name:value` lines.
pub fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.trim_end().strip_prefix(name)?.strip_prefix(':'))
}

impl RedisLease {
    /// The text of `INFO section` on the node that holds the lease.
    pub async fn info(&self, section: &str, timeout: Duration) -> Result<String, LeaseError> {
        const OP: &str = "info";
        let reply = self
            .call(OP, timeout, |mut live| async move {
                redis::cmd("INFO")
                    .arg(section)
                    .query_async(&mut live.conn)
                    .await
                    .map_err(self.fail(OP))
            })
            .await?;
        text(&reply).ok_or_else(|| protocol(OP, &reply))
    }

    /// The keys of the lease that hold something other than a string, with their type: asked
    /// after a script ran into one, so that the error names the key to delete (the script's
    /// message names only its line). Best effort: a failed look-up names none.
    pub(super) async fn wrong_types(&self, mut live: Live) -> Vec<(String, String)> {
        let mut found = Vec::new();
        for key in self.keys.written() {
            let kind = redis::cmd("TYPE")
                .arg(key)
                .query_async::<Value>(&mut live.conn)
                .await
                .ok()
                .and_then(|v| text(&v));
            if let Some(kind) = kind.filter(|k| k != "string" && k != "none") {
                found.push((key.to_owned(), kind));
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::info_field;

    #[test]
    fn a_field_is_found_by_its_whole_name() {
        let info = "# Replication\r\nrole_seen:slave\r\nrole:master\r\nempty:\r\n";
        assert_eq!(info_field(info, "role"), Some("master"));
        assert_eq!(info_field(info, "role_seen"), Some("slave"));
        assert_eq!(info_field(info, "empty"), Some(""));
        assert_eq!(info_field(info, "rol"), None);
        assert_eq!(info_field(info, "Replication"), None);
    }
}
