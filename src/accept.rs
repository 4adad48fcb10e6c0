//! What an HTTP `Accept` header asks for: the one reader of its media ranges, for `/leader`'s
//! event stream and `/metrics`' exposition.

use axum::http::{HeaderMap, header};

/// The `Accept` header, its lines joined into one list (RFC 9110: a proxy may split it).
pub fn header(headers: &HeaderMap) -> Option<String> {
    let lines: Vec<&str> = (headers.get_all(header::ACCEPT).iter())
        .filter_map(|v| v.to_str().ok())
        .collect();
    (!lines.is_empty()).then(|| lines.join(", "))
}

/// Whether `accept` names `media` (case aside, as media types and their `q` are) without
/// refusing it with a weight of 0 (or one that is not a number); a missing header names nothing.
pub fn names(accept: Option<&str>, media: &str) -> bool {
    accept.is_some_and(|accept| {
        accept.split(',').any(|range| {
            let mut parts = range.split(';').map(str::trim);
            let named = parts.next().unwrap_or_default();
            let refused = parts.any(|p| match p.split_once('=') {
                Some((q, weight)) if q.trim().eq_ignore_ascii_case("q") => weight
                    .trim()
                    .parse::<f32>()
                    .map_or(true, |w| w.is_nan() || w <= 0.0),
                _ => false,
            });
            named.eq_ignore_ascii_case(media) && !refused
        })
    })
}
