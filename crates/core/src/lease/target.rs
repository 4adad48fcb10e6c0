//! Where the lease lives: one Redis, a master found through Sentinel, or a Redis Cluster; with
//! TLS and ACL credentials. Parsed once, before anything connects.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{
    AsyncConnectionConfig, Client, ConnectionAddr, ConnectionInfo, IntoConnectionInfo,
    TlsCertificates,
};

use super::{LeaseError, LeaseOptions, PasswordSource, Remedies, Secret, redact_url};

/// TLS material, read from files (mounted Secrets).
#[derive(Clone, Default)]
pub struct TlsFiles {
    /// CA bundle (PEM) that signs the server's certificate; the system's roots when absent.
    pub ca_pem: Option<Vec<u8>>,
    /// Client certificate (PEM) for mutual TLS.
    pub client_cert_pem: Option<Vec<u8>>,
    /// Client key (PEM) for mutual TLS.
    pub client_key_pem: Option<Secret>,
}

impl fmt::Debug for TlsFiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsFiles")
            .field("ca", &self.ca_pem.is_some())
            .field("client_cert", &self.client_cert_pem.is_some())
            .field("client_key", &self.client_key_pem.is_some())
            .finish()
    }
}

impl TlsFiles {
    fn certificates(&self) -> TlsCertificates {
        TlsCertificates {
            client_tls: match (&self.client_cert_pem, &self.client_key_pem) {
                (Some(cert), Some(key)) => Some(redis::ClientTlsConfig {
                    client_cert: cert.clone(),
                    client_key: key.expose().as_bytes().to_vec(),
                }),
                _ => None,
            },
            root_cert: self.ca_pem.clone(),
        }
    }
}

/// Credentials and TLS for the Redis nodes.
#[derive(Debug, Clone, Default)]
pub(crate) struct Access {
    pub(crate) username: Option<String>,
    pub(crate) password: Option<Secret>,
    pub(crate) tls: Option<TlsFiles>,
    /// Password of the Sentinels themselves, when they require one.
    pub(crate) sentinel_password: Option<Secret>,
}

/// A Sentinel deployment: the Sentinels and the master's name.
#[derive(Debug, Clone)]
pub(crate) struct SentinelTarget {
    /// The URL's hosts, each standing for every address it resolves to (see `roster.rs`).
    pub(crate) sentinels: Vec<(String, u16)>,
    pub(crate) master: String,
    pub(crate) db: i64,
    pub(crate) tls: bool,
    /// The URL, its password redacted, for messages.
    pub(crate) url: String,
    /// A count of Sentinels other than odd and three or more is accepted (and said once).
    pub(crate) unsafe_count_allowed: bool,
}

/// The parsed target.
#[derive(Clone)]
pub(crate) enum Target {
    /// One Redis.
    Single(Client),
    /// A master found through Sentinel.
    Sentinel(SentinelTarget),
    /// A Redis Cluster: its seed nodes, asked for the lease's node at each dial and serving the
    /// pub/sub connection.
    Cluster(Vec<Client>),
}

/// Where a lease lives and how to reach it: a Redis URL parsed with the credentials and TLS
/// material of its [`LeaseOptions`], once, before anything connects. Every lease on it (and the
/// Sentinel count checked at start) takes it as it is, so a URL refused at start is never
/// parsed again, and one accepted there cannot be judged otherwise later.
#[derive(Clone)]
pub struct RedisTarget {
    pub(crate) target: Target,
    pub(crate) access: Access,
    /// The URL, its password redacted, for messages and logs.
    url: String,
    /// The URL as given, to build the target again with a new password.
    given_url: Secret,
    /// Asked for a new password when Redis refuses the one in use.
    pub(crate) password_source: Option<Arc<dyn PasswordSource>>,
    /// What a refusal says of the caller's side.
    pub(crate) remedies: Remedies,
}

impl RedisTarget {
    /// Parses `redis_url` (`redis://`, `rediss://`, `unix://`, `redis+sentinel://`,
    /// `redis+cluster://`) with the access settings of `options`. A refusal says what is wrong
    /// with the URL, its password redacted; the caller adds the flag's name.
    pub fn parse(redis_url: &str, options: &LeaseOptions) -> Result<Self, LeaseError> {
        let access = Access {
            username: options.username.clone(),
            password: options.password.clone(),
            tls: options.tls.clone(),
            sentinel_password: options.sentinel_password.clone(),
        };
        let mut target = Target::parse(redis_url, &access)?;
        if let Target::Sentinel(sentinels) = &mut target {
            sentinels.unsafe_count_allowed = options.allow_unsafe_sentinel_count;
        }
        Ok(Self {
            target,
            access,
            url: redact_url(redis_url),
            given_url: Secret::new(redis_url),
            password_source: options.password_source.clone(),
            remedies: options.remedies.clone(),
        })
    }

    /// The URL parsed again with `access` (a rotated password): one Redis's client and a
    /// Cluster's seeds carry the password.
    pub(crate) fn parse_with(&self, access: &Access) -> Result<Target, LeaseError> {
        Target::parse(self.given_url.expose(), access)
    }

    /// The URL with its password redacted.
    pub fn redacted_url(&self) -> &str {
        &self.url
    }

    /// Whether the master is found through Sentinel.
    pub fn is_sentinel(&self) -> bool {
        matches!(self.target, Target::Sentinel(_))
    }
}

impl fmt::Debug for RedisTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RedisTarget").field(&self.url).finish()
    }
}

/// Builds a client for one node with the access settings.
pub(crate) fn node_client(
    info: ConnectionInfo,
    access: &Access,
) -> Result<Client, redis::RedisError> {
    let mut settings = info.redis_settings().clone();
    if let Some(user) = &access.username {
        settings = settings.set_username(user);
    }
    if let Some(password) = &access.password {
        settings = settings.set_password(password.expose());
    }
    // One round trip less on every dial; a leader redialling over a slow link needs it.
    settings = settings.set_skip_set_lib_name();
    let info = info.set_redis_settings(settings);
    match (&access.tls, info.addr()) {
        (Some(tls), ConnectionAddr::TcpTls { .. }) => {
            Client::build_with_tls(info, tls.certificates())
        }
        _ => Client::open(info),
    }
}

/// A client for the node at `host` and `port` (database `db`, over TLS when `tls`), with
/// `access`.
pub(crate) fn node_at(
    host: &str,
    port: impl fmt::Display,
    db: i64,
    tls: bool,
    access: &Access,
) -> Result<Client, redis::RedisError> {
    let scheme = if tls { "rediss" } else { "redis" };
    let url = format!("{scheme}://{}:{port}/{db}", url_host(host));
    node_client(url.into_connection_info()?, access)
}

/// What a URL for one Redis looks like, for a refusal of one the client library cannot parse.
const FORM: &str = "the form is redis://[user:password@]host[:port][/database] (rediss:// for TLS) with a port from 1 to 65535 and a database number of 0 or more, or unix:///path/to/socket";

/// Splits `scheme://authority/path` into its parts; the authority may list several hosts.
fn split(url: &str) -> Option<(&str, &str, &str)> {
    let (scheme, rest) = url.split_once("://")?;
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    Some((scheme, authority, path))
}

/// A refused value of a Redis URL as its refusal shows it ([`redact_url`]). A value that is
/// no URL (a `:` or `//` missing) may hold a password before its last `@`, after its first
/// `:`, or be one; a URL without user info, where a port goes (`redis://user:password`).
fn shown(url: &str) -> String {
    let redacted = redact_url(url);
    let Some((_, authority, _)) = split(&redacted) else {
        return match (redacted.rfind('@'), redacted.split_once(':')) {
            (Some(at), _) => format!("***{}", &redacted[at..]),
            (None, Some((head, _))) => format!("{head}:***"),
            (None, None) => "***".into(),
        };
    };
    let authority = authority.split(['?', '#']).next().unwrap_or(authority);
    if authority.contains('@') {
        return redacted;
    }
    let hide_port = |part: &str| {
        let after = part.rfind(']').map_or(0, |i| i + 1); // past an IPv6 address
        match part[after..].split_once(':') {
            Some((host, port)) if port.len() > 5 || !port.bytes().all(|b| b.is_ascii_digit()) => {
                format!("{}{host}:***", &part[..after])
            }
            _ => part.to_owned(),
        }
    };
    let hidden: Vec<String> = authority.split(',').map(hide_port).collect();
    redacted.replacen(authority, &hidden.join(","), 1)
}

/// `host` as it goes into a URL: an IPv6 address in brackets (a seed's, a name a Sentinel
/// gave, an address a name resolved to).
pub(crate) fn url_host(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_owned()
    }
}

/// One `host[:port]` of a list; an IPv6 address in brackets, as in any URL.
fn host_port(part: &str, default_port: u16) -> Option<(String, u16)> {
    let part = part.trim();
    if part.contains('@') {
        return None;
    }
    let (host, port) = match part.strip_prefix('[') {
        Some(rest) => match rest.split_once(']')? {
            (host, "") => (host, None),
            (host, after) => (host, Some(after.strip_prefix(':')?)),
        },
        None => match part.split_once(':') {
            Some((_, port)) if port.contains(':') => return None,
            Some((host, port)) => (host, Some(port)),
            None => (part, None),
        },
    };
    let port = port.map_or(Some(default_port), |p| p.parse().ok().filter(|&p| p != 0))?;
    (!host.is_empty()).then(|| (host.to_owned(), port))
}

impl Target {
    /// Parses `url` with `access`, refusing as [`RedisTarget::parse`] does.
    pub(crate) fn parse(url: &str, access: &Access) -> Result<Self, LeaseError> {
        let bad = |reason: &str| LeaseError::BadUrl {
            url: shown(url),
            reason: reason.to_owned(),
        };
        let (scheme, authority, path) = split(url).ok_or_else(|| bad("not a URL"))?;
        let tls = scheme.starts_with("rediss");
        if access.tls.is_some() && !tls {
            return Err(bad(if scheme.ends_with("unix") {
                "TLS files are given but a unix socket has no TLS: leave them out"
            } else {
                "TLS files are given but the URL does not use TLS: use rediss://, rediss+sentinel:// or rediss+cluster://"
            }));
        }
        match scheme {
            "redis" | "rediss" | "unix" | "redis+unix" => {
                // The client reads only `protocol` of a TCP URL's query (`?db=3` would be
                // dropped), and would dial port 0.
                let tcp = redis::parse_redis_url(url).filter(|_| !scheme.ends_with("unix"));
                let mut query = tcp.iter().flat_map(|u| u.query_pairs()).map(|(key, _)| key);
                if let Some(key) = query.find(|key| key != "protocol") {
                    return Err(bad(&format!(
                        "`?{key}=` is not read in a redis:// URL: a database goes in the path (redis://host:6379/3), a password in --redis-password-file"
                    )));
                }
                if tcp.and_then(|u| u.port()) == Some(0) {
                    return Err(bad(FORM));
                }
                let info = url
                    .into_connection_info()
                    .ok()
                    .filter(|info| info.redis_settings().db() >= 0)
                    .ok_or_else(|| bad(FORM))?;
                let client = node_client(info, access).map_err(|e| bad(&e.to_string()))?;
                Ok(Target::Single(client))
            }
            "redis+sentinel" | "rediss+sentinel" => {
                let sentinels = authority
                    .split(',')
                    .map(|p| host_port(p, 26379))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| {
                        bad("list the Sentinels as host:port,host:port, an IPv6 address in brackets (credentials go in --redis-username and the password files)")
                    })?;
                let mut segments = path.split('/').filter(|s| !s.is_empty());
                if path.contains(['?', '#']) || segments.clone().nth(2).is_some() {
                    return Err(bad(
                        "after the Sentinels go the master name and a database, nothing else: redis+sentinel://host:26379/mymaster/3",
                    ));
                }
                let master = segments
                    .next()
                    .ok_or_else(|| bad("name the master after the Sentinels: redis+sentinel://host:26379/mymaster"))?
                    .to_owned();
                let db = match segments.next() {
                    Some(db) => db.parse::<u32>().map(i64::from).map_err(|_| {
                        bad("the database after the master name must be a number of 0 or more")
                    })?,
                    None => 0,
                };
                Ok(Target::Sentinel(SentinelTarget {
                    sentinels,
                    master,
                    db,
                    tls,
                    url: redact_url(url),
                    unsafe_count_allowed: false,
                }))
            }
            "redis+cluster" | "rediss+cluster" => {
                let nodes = authority
                    .split(',')
                    .map(|p| host_port(p, 6379))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| bad("list the seed nodes as host:port,host:port"))?;
                if !path.is_empty() {
                    return Err(bad("a Redis Cluster has only database 0: drop the path"));
                }
                let seeds = nodes
                    .iter()
                    .map(|(host, port)| node_at(host, port, 0, tls, access))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| bad(&e.to_string()))?;
                Ok(Target::Cluster(seeds))
            }
            _ => Err(bad(
                "the scheme must be redis://, rediss:// (TLS), unix://, redis+sentinel:// or redis+cluster:// (rediss+… with TLS)",
            )),
        }
    }
}

/// A multiplexed connection to one node, with no timeouts of redis-rs's own: every caller
/// bounds its calls itself.
pub(crate) async fn connect_node(client: &Client) -> redis::RedisResult<MultiplexedConnection> {
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(None)
        .set_response_timeout(None);
    client
        .get_multiplexed_async_connection_with_config(&config)
        .await
}

/// How long one ask of a Sentinel (naming the master) may take before it is given up; and
/// resolving one of the URL's Sentinel hosts.
pub(crate) const SENTINEL_TIMEOUT: Duration = Duration::from_secs(2);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_into_targets() {
        let access = Access::default();
        assert!(matches!(
            Target::parse("redis://127.0.0.1:6380/2", &access),
            Ok(Target::Single(_))
        ));
        match Target::parse("redis+sentinel://s1:26379,s2/mymaster/3", &access) {
            Ok(Target::Sentinel(t)) => {
                assert_eq!(
                    t.sentinels,
                    vec![("s1".to_owned(), 26379), ("s2".to_owned(), 26379)]
                );
                assert_eq!(t.master, "mymaster");
                assert_eq!(t.db, 3);
                assert!(!t.tls);
            }
            other => panic!("{:?}", other.err()),
        }
        assert!(matches!(
            Target::parse("redis+cluster://n1:7000,n2:7001", &access),
            Ok(Target::Cluster { .. })
        ));
        // IPv6 addresses in brackets, with their port or without.
        match Target::parse("redis+sentinel://[fd00::1],[::1]:26380,s3/m", &access) {
            Ok(Target::Sentinel(t)) => assert_eq!(
                t.sentinels,
                vec![
                    ("fd00::1".to_owned(), 26379),
                    ("::1".to_owned(), 26380),
                    ("s3".to_owned(), 26379)
                ]
            ),
            other => panic!("{:?}", other.err()),
        }
    }

    #[test]
    fn bad_targets_say_what_is_wrong() {
        let access = Access::default();
        let cases = [
            ("http://x", "the scheme must be redis://"),
            (
                "redis+sentinel://s1:26379",
                "name the master after the Sentinels",
            ),
            (
                "redis+sentinel://:pw@s1/m",
                "list the Sentinels as host:port",
            ),
            (
                "redis+sentinel://s1/m/x",
                "the database after the master name must be a number",
            ),
            ("redis+sentinel://s1/m/0/1", "nothing else"),
            ("redis+sentinel://s1/m?db=2", "nothing else"),
            ("redis+cluster://", "list the seed nodes"),
            ("redis+cluster://n1:7000/1", "only database 0"),
            ("redis+cluster://n1:notaport", "list the seed nodes"),
            // Bare, the address's own colons would be read as a port.
            ("redis+sentinel://fd00::1/m", "an IPv6 address in brackets"),
            ("redis+sentinel://[fd00::1/m", "an IPv6 address in brackets"),
            (
                "redis+sentinel://[fd00::1]x/m",
                "an IPv6 address in brackets",
            ),
            ("redis+cluster://[]:7000", "list the seed nodes"),
        ];
        for (url, want) in cases {
            let err = Target::parse(url, &access).err().expect(url).to_string();
            assert!(err.contains(want), "{url}: {err}");
        }
        let tls = Access {
            tls: Some(TlsFiles::default()),
            ..Access::default()
        };
        let cases = [
            ("redis://x", "the URL does not use TLS: use rediss://"),
            (
                "unix:///run/redis.sock",
                "a unix socket has no TLS: leave them out",
            ),
            ("redis+unix:///run/redis.sock", "a unix socket has no TLS"),
        ];
        for (url, want) in cases {
            let err = Target::parse(url, &tls).err().expect(url).to_string();
            assert!(err.contains(want), "{url}: {err}");
        }
    }
}
