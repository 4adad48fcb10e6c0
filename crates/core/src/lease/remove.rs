//! Removing a lease's keys from Redis once the lease is no longer used (its Deployment was
//! uninstalled): refused in the same script step while a term may still be valid, unless forced.

use std::time::Duration;

use redis::Value;

use super::reply::{int, protocol, remaining, text};
use super::scripts::REMOVE_SCRIPT;
use super::{LeaseError, RedisLease};

/// What a removal did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Removal {
    /// These keys existed and were deleted (none: the lease had no keys).
    Removed(Vec<String>),
    /// Nothing was deleted: a term may still be valid.
    Refused(InForce),
}

/// Why a lease's keys are not removed without force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InForce {
    /// The lease key holds `value` (a term, or a value leasehold did not write) for `remaining`
    /// more (`None`: it never expires), or its key vanished and the state record names a term
    /// that has not expired.
    Held {
        value: String,
        remaining: Option<Duration>,
    },
    /// A data-loss cooldown runs for this much longer: a term Redis lost may still be valid.
    CoolingDown(Duration),
}

impl RedisLease {
    /// Deletes every key leasehold writes for the lease ([`LeaseKeys::written`]), unless a
    /// term may still be valid and `force` is false. One script: no acquire falls between
    /// the check and the deletes.
    ///
    /// [`LeaseKeys::written`]: super::LeaseKeys::written
    pub async fn remove_keys(&self, force: bool, timeout: Duration) -> Result<Removal, LeaseError> {
        const OP: &str = "remove";
        let reply: Value = self
            .call(OP, timeout, |mut live| async move {
                REMOVE_SCRIPT
                    .key(self.keys.written())
                    .arg(if force { "force" } else { "" })
                    .invoke_async(&mut live.conn)
                    .await
                    .map_err(self.fail(OP))
            })
            .await?;
        parse_remove(&reply).ok_or_else(|| protocol(OP, &reply))
    }
}

fn parse_remove(reply: &Value) -> Option<Removal> {
    let Value::Array(items) = reply else {
        return None;
    };
    let (first, rest) = items.split_first()?;
    match (int(first)?, rest) {
        (1, keys) => Some(Removal::Removed(
            keys.iter().map(text).collect::<Option<_>>()?,
        )),
        (0, [why, value, ms]) => match text(why)?.as_str() {
            "HELD" => Some(Removal::Refused(InForce::Held {
                value: text(value)?,
                remaining: remaining(int(ms)?),
            })),
            "COOLDOWN" => Some(Removal::Refused(InForce::CoolingDown(remaining(int(ms)?)?))),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn every_reply_shape_maps_and_anything_else_is_none() {
        let cases = [
            (
                Value::Array(vec![Value::Int(1), bulk("a"), bulk("a:fence")]),
                Some(Removal::Removed(vec!["a".into(), "a:fence".into()])),
            ),
            (
                Value::Array(vec![Value::Int(1)]),
                Some(Removal::Removed(vec![])),
            ),
            (
                Value::Array(vec![
                    Value::Int(0),
                    bulk("HELD"),
                    bulk("w-x#7"),
                    Value::Int(900),
                ]),
                Some(Removal::Refused(InForce::Held {
                    value: "w-x#7".into(),
                    remaining: Some(Duration::from_millis(900)),
                })),
            ),
            (
                Value::Array(vec![Value::Int(0), bulk("HELD"), bulk("x"), Value::Int(-1)]),
                Some(Removal::Refused(InForce::Held {
                    value: "x".into(),
                    remaining: None,
                })),
            ),
            (
                Value::Array(vec![
                    Value::Int(0),
                    bulk("COOLDOWN"),
                    bulk(""),
                    Value::Int(5),
                ]),
                Some(Removal::Refused(InForce::CoolingDown(
                    Duration::from_millis(5),
                ))),
            ),
            (
                Value::Array(vec![Value::Int(0), bulk("WHAT"), bulk(""), Value::Int(5)]),
                None,
            ),
            (Value::Array(vec![]), None),
            (Value::Int(1), None),
        ];
        for (reply, want) in cases {
            assert_eq!(parse_remove(&reply), want, "{reply:?}");
        }
    }
}
