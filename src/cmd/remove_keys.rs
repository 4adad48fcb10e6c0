//! `leasehold remove-keys`: deletes a lease's keys from Redis once the lease is no longer used
//! (its Deployment uninstalled). Refused while a term may still be valid unless `--force`, in
//! the same script step as the deletes; prints each key it removed, and nothing else it read.

use serde::Serialize;

use super::lease::{CALL, asked_lease};
use crate::cli::{CliError, RemoveKeysSettings};
use crate::lease::{InForce, Removal, identity_of, split_term};

/// What `leasehold remove-keys --output json` prints (fields in docs/REFERENCE.md).
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct RemovedView {
    pub lease: String,
    pub removed: Vec<String>,
}

impl RemovedView {
    /// A line per key, for people.
    pub fn text(&self) -> String {
        if self.removed.is_empty() {
            return format!(
                "lease {} has no keys in this Redis; nothing removed\n",
                self.lease
            );
        }
        self.removed
            .iter()
            .map(|k| format!("removed {k}\n"))
            .collect()
    }
}

/// Why nothing was removed, in words.
fn refusal(lease: &str, why: &InForce) -> String {
    match why {
        InForce::Held {
            value,
            remaining: Some(left),
        } => {
            let (owner, token) = split_term(value);
            let token = token.map_or_else(String::new, |t| format!(" (token {t})"));
            format!(
                "lease {lease} is held by {}{token} for {} ms more: removing its keys now could let two replicas lead; stop its replicas (helm uninstall) and run this again once the term expired, or pass --force",
                super::printable(identity_of(owner)),
                left.as_millis()
            )
        }
        InForce::Held {
            value,
            remaining: None,
        } => format!(
            "lease {lease} holds `{}`, which never expires (not written by leasehold); pass --force to remove it",
            super::printable(value)
        ),
        InForce::CoolingDown(left) => format!(
            "lease {lease} is in a data-loss cooldown for {} ms more: a term that Redis lost may still be valid; run this again after it, or pass --force",
            left.as_millis()
        ),
    }
}

/// Removes the lease's keys; returns the exit code (1 when refused).
pub async fn remove_keys(settings: RemoveKeysSettings) -> Result<i32, CliError> {
    let RemoveKeysSettings { status, force } = settings;
    let lease = asked_lease(&status, "leasehold-remove-keys").await?;
    let lease_name = lease.name();
    let removed = match lease
        .remove_keys(force, CALL)
        .await
        .map_err(|e| status.redis.failed(e))?
    {
        Removal::Removed(keys) => keys,
        Removal::Refused(why) => {
            say!("{}", refusal(lease_name.as_str(), &why));
            return Ok(1);
        }
    };
    let view = RemovedView {
        lease: lease_name.to_string(),
        removed,
    };
    super::print(status.output, &view, RemovedView::text)?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn each_refusal_says_what_holds_and_how_to_go_on() {
        let owner = "web-a-0b7c2b5e-6a4c-4a39-9a55-0d9b1b1f0c3e";
        let cases = [
            (
                InForce::Held {
                    value: format!("{owner}#7"),
                    remaining: Some(Duration::from_millis(900)),
                },
                "lease shop/web is held by web-a (token 7) for 900 ms more: removing its keys now could let two replicas lead; stop its replicas (helm uninstall) and run this again once the term expired, or pass --force",
            ),
            (
                InForce::Held {
                    value: "somebody".into(),
                    remaining: None,
                },
                "lease shop/web holds `somebody`, which never expires (not written by leasehold); pass --force to remove it",
            ),
            (
                InForce::CoolingDown(Duration::from_millis(1500)),
                "lease shop/web is in a data-loss cooldown for 1500 ms more: a term that Redis lost may still be valid; run this again after it, or pass --force",
            ),
        ];
        for (why, want) in cases {
            assert_eq!(refusal("shop/web", &why), want);
        }
    }
}
