//! Kubernetes' name rules (RFC 1123), in one place: namespaces are DNS labels; object names
//! and label-key prefixes are DNS subdomains.

/// A DNS label: 1 to 63 characters of `a-z`, `0-9` and `-`, a letter or digit at both ends.
pub fn is_dns_label(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 63
        && value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !value.starts_with('-')
        && !value.ends_with('-')
}

/// A DNS subdomain: at most 253 characters of dot-separated DNS labels.
pub fn is_dns_subdomain(value: &str) -> bool {
    !value.is_empty() && value.len() <= 253 && value.split('.').all(is_dns_label)
}

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
    }
}
