//! The Redis flags into [`RedisSettings`]: the URL parsed once into a target with its
//! credentials and TLS files, the options of the lease, and the Sentinel count checked at start.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use super::resolve::above_zero;
use super::secrets::{check_client_pair, read_ca, read_pem, read_secret, read_username};
use super::settings::RedisSettings;
use super::{CliError, ContenderRedisArgs, Environment, RedisArgs};
use crate::lease::{
    LeaseError, LeaseKeys, LeaseOptions, PasswordSource, RedisTarget, Remedies, TlsFiles,
    WaitReplicas, check_sentinels, redact_url,
};
use crate::secret_file::PasswordFile;

/// The URL without its password (LEASEHOLD_REDIS_URL may carry one).
impl std::fmt::Debug for RedisArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisArgs")
            .field("redis_url", &redact_url(&self.redis_url))
            .finish_non_exhaustive()
    }
}

impl RedisArgs {
    /// The connection's settings.
    pub(super) fn resolve(&self, env: &Environment) -> Result<RedisSettings, CliError> {
        let url = self.redis_url.trim().to_owned();
        let redacted = redact_url(&url);
        let has_password = redacted != url;
        let bad = |rule: &str| CliError::RedisUrl {
            url: redacted.clone(),
            rule: rule.to_owned(),
        };
        if has_password && env.redis_url_on_command_line {
            return Err(bad(
                "a password on the command line shows in `ps`; put it in a file and pass --redis-password-file (or set LEASEHOLD_REDIS_URL)",
            ));
        }
        if self.key_prefix.is_empty() {
            let rule = "must not be empty (the default is `leasehold:`)";
            return Err(CliError::value("key-prefix", "", rule));
        }
        LeaseKeys::check_prefix(&self.key_prefix)
            .map_err(|e| CliError::value("key-prefix", &self.key_prefix, e.to_string()))?;
        let password = self
            .redis_password_file
            .as_deref()
            .map(|p| read_secret("redis-password-file", p))
            .transpose()?;
        let username = match (&self.redis_username, &self.redis_username_file) {
            (Some(name), _) if name.trim().is_empty() => {
                return Err(CliError::value(
                    "redis-username",
                    "",
                    "must not be empty when given",
                ));
            }
            (Some(name), _) => Some(name.trim().to_owned()),
            (None, Some(path)) => Some(read_username("redis-username-file", path)?),
            (None, None) => None,
        };
        let tls = self.tls_files()?;
        let sentinel_password = self
            .sentinel_password_file
            .as_deref()
            .map(|p| read_secret("sentinel-password-file", p))
            .transpose()?;
        if sentinel_password.is_some() && !url.contains("+sentinel://") {
            return Err(CliError::Misplaced {
                flag: "--sentinel-password-file",
                rule: "is only for redis+sentinel:// URLs",
            });
        }
        if self.allow_unsafe_sentinel_count && !url.contains("+sentinel://") {
            return Err(CliError::Misplaced {
                flag: "--allow-unsafe-sentinel-count",
                rule: "is only for redis+sentinel:// URLs",
            });
        }
        let options = LeaseOptions {
            key_prefix: self.key_prefix.clone(),
            username,
            password,
            password_source: self
                .redis_password_file
                .clone()
                .map(|path| Arc::new(PasswordFile(path)) as Arc<dyn PasswordSource>),
            remedies: self.remedies(has_password.then_some(&env.redis_url_from)),
            tls,
            sentinel_password,
            allow_unsafe_sentinel_count: self.allow_unsafe_sentinel_count,
            ..LeaseOptions::default()
        };
        // The target parser judges the rest of the URL now, before anything connects, and its
        // verdict is the target every lease of the command is made on.
        let target = RedisTarget::parse(&url, &options).map_err(|e| match e {
            // Shown as the parser shows it: a value that is no URL hides more than a URL does.
            LeaseError::BadUrl { url, reason } => CliError::RedisUrl { url, rule: reason },
            other => bad(&other.to_string()),
        })?;
        Ok(RedisSettings { target, options })
    }

    /// What a refused password or an untrusted certificate says of the flags: where the password
    /// came from (`url_with_password`: the URL holds one, and where the URL came from), how to
    /// give one or a CA.
    fn remedies(&self, url_with_password: Option<&Option<String>>) -> Remedies {
        const GIVE_ONE: &str =
            "put it in a file and pass --redis-password-file, or in the URL of LEASEHOLD_REDIS_URL";
        let refused_password = match &self.redis_password_file {
            Some(path) => format!(
                "the password comes from --redis-password-file {}",
                path.display()
            ),
            // A URL with a password is refused on the command line: it came from elsewhere.
            None => match url_with_password {
                Some(from) => format!(
                    "the password comes from the URL in {}",
                    from.as_deref().unwrap_or("$LEASEHOLD_REDIS_URL")
                ),
                None => format!("no password was given: {GIVE_ONE}"),
            },
        };
        let unknown_issuer = if self.redis_ca_file.is_some() {
            "the CA in --redis-ca-file did not sign it"
        } else {
            "the system's CAs did not sign it: pass the CA that signed it with --redis-ca-file"
        };
        Remedies {
            no_password: GIVE_ONE.to_owned(),
            refused_password,
            unknown_issuer: unknown_issuer.to_owned(),
        }
    }

    fn tls_files(&self) -> Result<Option<TlsFiles>, CliError> {
        let (ca, cert, key) = (
            &self.redis_ca_file,
            &self.redis_client_cert_file,
            &self.redis_client_key_file,
        );
        if ca.is_none() && cert.is_none() && key.is_none() {
            return Ok(None);
        }
        if cert.is_some() != key.is_some() {
            return Err(CliError::Misplaced {
                flag: "--redis-client-cert-file",
                rule: "mutual TLS needs both --redis-client-cert-file and --redis-client-key-file",
            });
        }
        let files = TlsFiles {
            ca_pem: ca
                .as_deref()
                .map(|p| read_ca("redis-ca-file", p))
                .transpose()?,
            client_cert_pem: cert
                .as_deref()
                .map(|p| read_pem("redis-client-cert-file", p))
                .transpose()?,
            client_key_pem: key
                .as_deref()
                .map(|p| read_secret("redis-client-key-file", p))
                .transpose()?,
        };
        if let (Some(cert), Some(cert_pem), Some(key), Some(key_pem)) =
            (cert, &files.client_cert_pem, key, &files.client_key_pem)
        {
            check_client_pair((cert, cert_pem), (key, key_pem))?;
        }
        Ok(Some(files))
    }
}

impl ContenderRedisArgs {
    /// The `WAIT` after each write, if asked for: its timeout must be greater than zero and
    /// shorter than `retry_period` (the upper bound is checked with the other durations).
    pub(super) fn wait_replicas(
        &self,
        retry_period: Duration,
    ) -> Result<Option<WaitReplicas>, CliError> {
        if self.redis_wait_replicas == 0 {
            return Ok(None);
        }
        if self.redis_wait_timeout >= retry_period {
            return Err(CliError::Order {
                flag: "redis-wait-timeout",
                value: self.redis_wait_timeout,
                other: "--retry-period",
                other_value: retry_period,
            });
        }
        above_zero("redis-wait-timeout", self.redis_wait_timeout)?;
        Ok(Some(WaitReplicas {
            replicas: self.redis_wait_replicas,
            timeout: self.redis_wait_timeout,
        }))
    }
}

impl RedisSettings {
    /// For a `redis+sentinel://` URL: the Sentinels its hosts resolve to now, refused when they are
    /// not an odd number of three or more (unless --allow-unsafe-sentinel-count accepts it) or a
    /// host does not resolve (see [`check_sentinels`]). The one rule checked against the network
    /// rather than the input alone, so kept out of the `resolve` methods, which the chart's tests
    /// run on rendered values. No runtime exists yet: it resolves on a small one of its own, which
    /// it leaves without waiting for a resolver thread that outlived its bound.
    pub(super) fn sentinels_at_start(&self) -> Result<(), CliError> {
        if !self.target.is_sentinel() {
            return Ok(());
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .context("cannot start a runtime to resolve the Sentinels")?;
        let checked = runtime.block_on(check_sentinels(&self.target));
        runtime.shutdown_background();
        checked.map_err(|e| match e {
            LeaseError::BadUrl { url, reason } => CliError::RedisUrl { url, rule: reason },
            other => CliError::RedisUrl {
                url: self.target.redacted_url().to_owned(),
                rule: other.to_string(),
            },
        })
    }
}
