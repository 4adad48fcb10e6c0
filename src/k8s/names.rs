//! Kubernetes' name rules (RFC 1123), in one place: namespaces are DNS labels; object names
//! and label-key prefixes are DNS subdomains; label keys are an optional prefix and a name.

/// The longest namespace (a DNS label), in bytes.
pub const MAX_NAMESPACE_LEN: usize = 63;

/// The longest object name (a DNS subdomain), in bytes.
pub const MAX_OBJECT_NAME_LEN: usize = 253;

/// A DNS label: 1 to 63 characters of `a-z`, `0-9` and `-`, a letter or digit at both ends.
pub fn is_dns_label(value: &str) -> bool {
    value.len() <= MAX_NAMESPACE_LEN && is_dns_part(value)
}

/// A DNS subdomain: at most 253 characters of dot-separated parts, each as a DNS label but of
/// any length, as Kubernetes has it (a Deployment's name may have a part of 70 characters).
pub fn is_dns_subdomain(value: &str) -> bool {
    value.len() <= MAX_OBJECT_NAME_LEN && value.split('.').all(is_dns_part)
}

/// Characters of `a-z`, `0-9` and `-`, at least one, a letter or digit at both ends.
fn is_dns_part(value: &str) -> bool {
    !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !value.starts_with('-')
        && !value.ends_with('-')
}

/// A label key: an optional DNS-subdomain prefix and `/`, then a name of 1 to 63 characters of
/// letters, digits, `-`, `_` and `.`, a letter or digit at both ends.
pub fn is_label_key(key: &str) -> bool {
    let (prefix, name) = key
        .rsplit_once('/')
        .map_or((None, key), |(p, n)| (Some(p), n));
    let alnum = |c: char| c.is_ascii_alphanumeric();
    name.len() <= 63
        && name.starts_with(alnum)
        && name.ends_with(alnum)
        && name
            .chars()
            .all(|c| alnum(c) || matches!(c, '-' | '_' | '.'))
        && prefix.is_none_or(is_dns_subdomain)
}

/// The label-key rule in words, for refusals.
pub const LABEL_KEY_RULE: &str = "must be a Kubernetes label key: [prefix/]name, the name 1 to 63 characters of letters, digits, '-', '_' and '.' starting and ending with a letter or digit, the prefix a DNS subdomain";

/// The DNS-subdomain rule in words, for refusals.
pub const DNS_SUBDOMAIN_RULE: &str = "must be a DNS subdomain: at most 253 characters of dot-separated parts of a-z, 0-9 and '-', each starting and ending with a letter or digit";

/// The DNS-label rule in words, for refusals.
pub const DNS_LABEL_RULE: &str = "must be a DNS label: 1 to 63 characters of a-z, 0-9 and '-', starting and ending with a letter or digit";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_rfc_1123() {
        for ok in ["a", "web-1", "0ab"] {
            assert!(is_dns_label(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", "A", "a_b", "a.b", &"x".repeat(64)] {
            assert!(!is_dns_label(bad), "{bad}");
        }
        assert!(is_dns_subdomain("leasehold.io"));
        assert!(!is_dns_subdomain("leasehold..io"));
        assert!(!is_dns_subdomain("-x.io"));
        assert!(!is_dns_subdomain(&"a.".repeat(127)));
        // Kubernetes limits a subdomain's length, not its parts' (a label's 63).
        assert!(is_dns_subdomain(&"x".repeat(70)));
        assert!(!is_dns_subdomain(&"x".repeat(254)));
    }

    #[test]
    fn label_keys_follow_kubernetes_rules() {
        for ok in ["leasehold.io/leader", "leader", "a.b-c/x_y.z"] {
            assert!(is_label_key(ok), "{ok}");
        }
        for bad in ["", "/x", "Bad.IO/x", "x/-a", "a/b/c d", &"x".repeat(64)] {
            assert!(!is_label_key(bad), "{bad}");
        }
    }
}
