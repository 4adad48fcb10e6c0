//! What an HTTP `Accept` header asks for: the one reader of its media ranges, for `/leader`'s
//! event stream and `/metrics`' exposition.

/// Whether `accept` names `media` (case aside, as media types are) without refusing it with
/// `q=0`; a missing header names nothing.
pub fn names(accept: Option<&str>, media: &str) -> bool {
    accept.is_some_and(|accept| {
        accept.split(',').any(|range| {
            let mut parts = range.split(';').map(str::trim);
            let named = parts.next().unwrap_or_default();
            let refused = parts.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            named.eq_ignore_ascii_case(media) && !refused
        })
    })
}
