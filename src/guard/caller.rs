//! Whose term the reader of a guard file belongs to: the lease and the fencing token that
//! `leasehold run` gives its command, so that a record of another lease or term is refused.
//!
//! The guard file is owned by one live leasehold (`owned_file`), but a command can outlive its
//! leasehold (a SIGKILLed leasehold's orphans run on) and the file can be written by someone
//! else; a command that knows its term never takes another term's record for its own. A reader
//! that knows neither (a sidecar in another container) is answered for whatever term the file
//! holds: "does the leasehold that owns this file lead now", with the token to fence its writes.

use std::fmt;

use crate::lease::{FencingToken, LeaseName};

/// The environment variable that carries the fencing token of the command's term.
pub const TOKEN_ENV: &str = "LEASEHOLD_FENCING_TOKEN";
/// The environment variable that carries the lease name.
pub const LEASE_ENV: &str = "LEASEHOLD_LEASE";

/// What the reader knows of its own term; `None` where it knows nothing (then any value passes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallerTerm {
    /// The reader's lease: a record of another lease is refused.
    pub lease: Option<LeaseName>,
    /// The reader's term: a record of another term is refused.
    pub token: Option<FencingToken>,
}

/// A value of the caller's term that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallerError {
    /// Where it came from (a variable or a flag).
    pub source: &'static str,
    /// The value.
    pub value: String,
    /// The rule.
    pub rule: String,
}

impl fmt::Display for CallerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} `{}`: {}", self.source, self.value, self.rule)
    }
}

impl std::error::Error for CallerError {}

impl CallerTerm {
    /// The term as `leasehold run` gives it to its command: `$LEASEHOLD_LEASE` and
    /// `$LEASEHOLD_FENCING_TOKEN`, each when set and not empty.
    pub fn from_env() -> Result<Self, CallerError> {
        let var = |name: &'static str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(|v| (name, v.to_string_lossy().into_owned()))
        };
        let lease = var(LEASE_ENV)
            .map(|(name, v)| parse_lease(name, &v))
            .transpose()?;
        let token = var(TOKEN_ENV)
            .map(|(name, v)| parse_token(name, &v))
            .transpose()?;
        Ok(Self { lease, token })
    }
}

/// A fencing token as the command gets it: a positive decimal number.
pub fn parse_token(source: &'static str, value: &str) -> Result<FencingToken, CallerError> {
    match value.parse::<u64>() {
        Ok(token) if token > 0 && !value.starts_with('+') => Ok(FencingToken(token)),
        _ => Err(CallerError {
            source,
            value: value.to_owned(),
            rule: "must be a fencing token, a positive whole number (leasehold run gives the command its term's)".into(),
        }),
    }
}

/// A lease name as the command gets it.
pub fn parse_lease(source: &'static str, value: &str) -> Result<LeaseName, CallerError> {
    LeaseName::new(value).map_err(|e| CallerError {
        source,
        value: value.to_owned(),
        rule: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_and_leases_parse_or_say_the_rule() {
        assert_eq!(parse_token("--token", "42"), Ok(FencingToken(42)));
        for bad in ["0", "-1", "+4", "4x", "", " 4", "99999999999999999999"] {
            let err = parse_token("--token", bad).unwrap_err();
            assert!(
                err.to_string()
                    .starts_with(&format!("--token `{bad}`: must be a fencing token")),
                "{err}"
            );
        }
        assert_eq!(
            parse_lease("--lease", "shop/web").unwrap().as_str(),
            "shop/web"
        );
        let err = parse_lease("--lease", "a b").unwrap_err();
        assert!(err.to_string().contains("whitespace"), "{err}");
    }
}
