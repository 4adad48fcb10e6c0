//! A request's body: its media type, and its JSON (or YAML) value.

use serde_json::Value;

use super::status::ApiError;

/// The media type of a Content-Type, without parameters, lowercased.
pub(super) fn media_type(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// The body as JSON (YAML for YAML media types); `None` when empty; 400 when unreadable.
pub(super) fn decode_body(
    media_type: Option<&str>,
    body: &[u8],
) -> Result<Option<Value>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let is_yaml = media_type.is_some_and(|m| m.ends_with("yaml"));
    let decoded = if is_yaml {
        serde_yaml::from_slice::<Value>(body).map_err(|err| err.to_string())
    } else {
        serde_json::from_slice::<Value>(body).map_err(|err| err.to_string())
    };
    decoded.map(Some).map_err(|err| {
        ApiError::bad_request(format!("the request body could not be decoded: {err}"))
    })
}
