//! Which processes are the Sentinels, and how many a majority is counted from. The rules (one
//! per address, IPv4 only on a dual stack, odd and three or more) and why: docs/REFERENCE.md,
//! "How many Sentinels".

use std::fmt;
use std::net::SocketAddr;

use futures_util::future::join_all;

use super::target::{SENTINEL_TIMEOUT, url_host};

/// One Sentinel: the address it was resolved to, and how it is dialled.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Member {
    /// The address the URL's host resolved to.
    pub(crate) addr: SocketAddr,
    /// Over TLS: the host name as the URL gives it, dialled (and checked against the
    /// certificate) instead of the address.
    pub(crate) name: Option<String>,
}

impl Member {
    /// The host to dial, as it goes into a `redis://host:port` URL.
    pub(crate) fn host(&self) -> String {
        match &self.name {
            Some(name) => url_host(name),
            None => url_host(&self.addr.ip().to_string()),
        }
    }
}

impl fmt::Display for Member {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.name {
            Some(name) => write!(f, "{name}:{} ({})", self.addr.port(), self.addr),
            None => write!(f, "{}", self.addr),
        }
    }
}

/// Resolves every host of the URL at once, each within [`SENTINEL_TIMEOUT`], into the
/// Sentinels they stand for; an error names the host that did not resolve.
pub(crate) async fn resolve(hosts: &[(String, u16)], tls: bool) -> Result<Vec<Member>, String> {
    let lookups = hosts.iter().map(|(host, port)| async move {
        let lookup = tokio::net::lookup_host((host.as_str(), *port));
        match tokio::time::timeout(SENTINEL_TIMEOUT, lookup).await {
            Ok(Ok(addrs)) => Ok(addrs.collect::<Vec<_>>()),
            Ok(Err(e)) => Err(format!("Sentinel host `{host}` does not resolve: {e}")),
            Err(_) => Err(format!(
                "Sentinel host `{host}` does not resolve within {SENTINEL_TIMEOUT:?}"
            )),
        }
    });
    let resolved = join_all(lookups)
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    members(hosts, &resolved, tls)
}

/// The Sentinels that `hosts` stand for, `resolved[i]` being the addresses of `hosts[i]`.
fn members(
    hosts: &[(String, u16)],
    resolved: &[Vec<SocketAddr>],
    tls: bool,
) -> Result<Vec<Member>, String> {
    let mut members: Vec<Member> = Vec::new();
    for ((host, _), addrs) in hosts.iter().zip(resolved) {
        let v4: Vec<SocketAddr> = addrs.iter().copied().filter(SocketAddr::is_ipv4).collect();
        let mut kept = if v4.is_empty() { addrs.clone() } else { v4 };
        // getaddrinfo may give an address more than once: keep the first.
        let mut seen = std::collections::HashSet::new();
        kept.retain(|a| seen.insert(*a));
        if kept.is_empty() {
            return Err(format!("Sentinel host `{host}` resolves to no address"));
        }
        if tls && kept.len() > 1 {
            return Err(format!(
                "Sentinel host `{host}` resolves to {} addresses ({}), but over TLS each Sentinel \
                 is dialled by its name, which its certificate carries: list each Sentinel by a \
                 name of its own (a pod's name under a headless Service)",
                kept.len(),
                list(&kept)
            ));
        }
        for addr in kept {
            if !members.iter().any(|m| m.addr == addr) {
                members.push(Member {
                    addr,
                    name: tls.then(|| host.clone()),
                });
            }
        }
    }
    Ok(members)
}

/// `items`, comma-separated.
pub(crate) fn list<T: fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a majority of `count` Sentinels gives up, when the count is not odd and at least three.
pub(crate) fn weakness(count: usize) -> Option<String> {
    match count {
        0 => Some("no Sentinel at all".to_owned()),
        1 => Some(
            "one Sentinel's word alone names the master, and one Sentinel's word made two leaders \
             at once after a failover that it had missed"
                .to_owned(),
        ),
        even if even % 2 == 0 => {
            let majority = even / 2 + 1;
            Some(format!(
                "a majority of an even number is no better than of one fewer: {even} Sentinels \
                 need {majority} answers and survive {} down, no more than {} would",
                even - majority,
                even - 1
            ))
        }
        _ => None,
    }
}

/// The refusal of `count` Sentinels (`members` those resolved now), when [`weakness`] finds
/// one: what the URL stands for, what it gives up, and the way out.
pub(crate) fn refusal(count: usize, members: &[Member]) -> Option<String> {
    let weak = weakness(count)?;
    let plural = if count == 1 { "" } else { "s" };
    Some(format!(
        "{count} Sentinel{plural} ({}): {weak}; leasehold needs an odd number of Sentinels, \
         three or more, since it trusts a master only when more than half of them name it: list \
         every Sentinel, or a name that resolves to each of them (a headless Service), or accept \
         the risk with --allow-unsafe-sentinel-count",
        list(members)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn hosts(names: &[&str]) -> Vec<(String, u16)> {
        names.iter().map(|n| ((*n).to_owned(), 26379)).collect()
    }

    /// The URL's hosts, the addresses each resolves to, TLS, the Sentinels (their addresses)
    /// or the start of the error, and why.
    type Row<'a> = (
        &'a [&'a str],
        &'a [&'a [&'a str]],
        bool,
        Result<&'a [&'a str], &'a str>,
        &'a str,
    );

    #[test]
    fn each_address_is_one_sentinel_and_each_sentinel_counts_once() {
        let rows: &[Row] = &[
            (
                &["sentinels"],
                &[&["10.0.0.1:26379", "10.0.0.2:26379", "10.0.0.3:26379"]],
                false,
                Ok(&["10.0.0.1:26379", "10.0.0.2:26379", "10.0.0.3:26379"]),
                "a headless Service's name: one Sentinel per pod",
            ),
            (
                &["a", "b", "c"],
                &[
                    &["10.0.0.1:26379"],
                    &["10.0.0.1:26379"],
                    &["10.0.0.2:26379"],
                ],
                false,
                Ok(&["10.0.0.1:26379", "10.0.0.2:26379"]),
                "two names of one Sentinel count once",
            ),
            (
                &["localhost"],
                &[&["[::1]:26379", "127.0.0.1:26379"]],
                false,
                Ok(&["127.0.0.1:26379"]),
                "IPv4 and IPv6 of one host: its IPv4 address alone",
            ),
            (
                &["v6"],
                &[&["[fd00::1]:26379", "[fd00::2]:26379"]],
                false,
                Ok(&["[fd00::1]:26379", "[fd00::2]:26379"]),
                "an IPv6-only name keeps its addresses",
            ),
            (
                &["s"],
                &[&["10.0.0.1:26379", "10.0.0.1:26379"]],
                false,
                Ok(&["10.0.0.1:26379"]),
                "an address given twice",
            ),
            (
                &["s1", "s2"],
                &[&["10.0.0.1:26379"], &[]],
                false,
                Err("Sentinel host `s2` resolves to no address"),
                "a name without addresses",
            ),
            (
                &["s1", "s2", "s3"],
                &[
                    &["10.0.0.1:26379"],
                    &["10.0.0.2:26379"],
                    &["10.0.0.3:26379"],
                ],
                true,
                Ok(&["10.0.0.1:26379", "10.0.0.2:26379", "10.0.0.3:26379"]),
                "TLS: one name per Sentinel",
            ),
            (
                &["sentinels"],
                &[&["10.0.0.1:26379", "10.0.0.2:26379"]],
                true,
                Err("Sentinel host `sentinels` resolves to 2 addresses"),
                "TLS: a name that stands for several Sentinels cannot be dialled as each",
            ),
        ];
        for (names, resolved, tls, want, why) in rows {
            let resolved: Vec<Vec<SocketAddr>> = resolved
                .iter()
                .map(|addrs| addrs.iter().map(|a| addr(a)).collect())
                .collect();
            let got = members(&hosts(names), &resolved, *tls);
            match (got, want) {
                (Ok(got), Ok(want)) => {
                    let got: Vec<SocketAddr> = got.iter().map(|m| m.addr).collect();
                    let want: Vec<SocketAddr> = want.iter().map(|a| addr(a)).collect();
                    assert_eq!(got, want, "{why}");
                }
                (Err(got), Err(want)) => assert!(got.starts_with(want), "{why}: {got}"),
                (got, want) => panic!("{why}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn a_member_is_dialled_by_address_or_over_tls_by_name() {
        let plain = Member {
            addr: addr("[fd00::1]:26379"),
            name: None,
        };
        assert_eq!(
            (plain.host(), plain.addr.port()),
            ("[fd00::1]".into(), 26379)
        );
        assert_eq!(plain.to_string(), "[fd00::1]:26379");
        let tls = Member {
            addr: addr("10.0.0.1:26379"),
            name: Some("s1.data".into()),
        };
        assert_eq!(tls.host(), "s1.data");
        assert_eq!(tls.to_string(), "s1.data:26379 (10.0.0.1:26379)");
        // Over TLS by a name that is an IPv6 address, as the URL gave it.
        let tls_v6 = Member {
            addr: addr("[fd00::2]:26379"),
            name: Some("fd00::2".into()),
        };
        assert_eq!(tls_v6.host(), "[fd00::2]");
    }

    #[test]
    fn only_an_odd_number_of_three_or_more_sentinels_is_safe() {
        let rows: &[(usize, Option<&str>)] = &[
            (0, Some("no Sentinel at all")),
            (1, Some("one Sentinel's word alone names the master")),
            (
                2,
                Some("2 Sentinels need 2 answers and survive 0 down, no more than 1 would"),
            ),
            (3, None),
            (
                4,
                Some("4 Sentinels need 3 answers and survive 1 down, no more than 3 would"),
            ),
            (5, None),
            (
                6,
                Some("6 Sentinels need 4 answers and survive 2 down, no more than 5 would"),
            ),
            (7, None),
        ];
        for (count, want) in rows {
            match (weakness(*count), want) {
                (None, None) => {}
                (Some(got), Some(want)) => assert!(got.contains(want), "{count}: {got}"),
                (got, want) => panic!("{count}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn the_refusal_lists_the_sentinels_and_the_way_out() {
        let one = [Member {
            addr: addr("127.0.0.1:26379"),
            name: None,
        }];
        let text = refusal(1, &one).unwrap();
        assert!(
            text.starts_with("1 Sentinel (127.0.0.1:26379): one Sentinel's word"),
            "{text}"
        );
        assert!(
            text.ends_with("or accept the risk with --allow-unsafe-sentinel-count"),
            "{text}"
        );
        assert_eq!(refusal(3, &one), None);
    }
}
