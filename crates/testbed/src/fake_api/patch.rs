//! Patch bodies by Content-Type: JSON merge patch, strategic merge patch (applied as a merge
//! patch), JSON patch, and server-side apply (applied as a merge patch).

use serde_json::Value;

use super::status::ApiError;

/// The four patch types the API server takes, from the request's Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    /// `application/merge-patch+json`, RFC 7386.
    Merge,
    /// `application/strategic-merge-patch+json`.
    StrategicMerge,
    /// `application/json-patch+json`, RFC 6902.
    Json,
    /// `application/apply-patch+yaml`: server-side apply.
    Apply,
}

impl PatchKind {
    /// The patch type of a media type (parameters such as `charset` already stripped); 415 for
    /// anything else.
    pub fn from_media_type(media_type: Option<&str>) -> Result<Self, ApiError> {
        match media_type {
            Some("application/merge-patch+json") => Ok(Self::Merge),
            Some("application/strategic-merge-patch+json") => Ok(Self::StrategicMerge),
            Some("application/json-patch+json") => Ok(Self::Json),
            Some("application/apply-patch+yaml") => Ok(Self::Apply),
            other => Err(ApiError::unsupported_media_type(other)),
        }
    }
}

/// The stored object with the patch applied. The caller decides what of the result to keep
/// (all of it, or only `.status` for the status subresource) and checks its resourceVersion.
pub fn apply(kind: PatchKind, stored: &Value, patch: &Value) -> Result<Value, ApiError> {
    let mut patched = stored.clone();
    match kind {
        PatchKind::Merge => json_patch::merge(&mut patched, patch),
        // The real server merges lists by their patch merge key (containers by name, ...) and
        // obeys `$patch`/`$retainKeys`/`$setElementOrder` directives. Our callers only patch
        // maps, where a strategic merge is a JSON merge; directives are dropped, not stored.
        PatchKind::StrategicMerge => json_patch::merge(&mut patched, &without_directives(patch)),
        // Server-side apply, simplified: the applied fields are merged into the stored object.
        // Fields this manager applied before and now leaves out are NOT removed, managedFields
        // are not tracked, and there are no conflicts between field managers (`force` is moot).
        PatchKind::Apply => json_patch::merge(&mut patched, patch),
        PatchKind::Json => {
            let operations: json_patch::Patch = serde_json::from_value(patch.clone())
                .map_err(|err| ApiError::bad_request(format!("invalid JSON patch: {err}")))?;
            json_patch::patch(&mut patched, &operations).map_err(|err| {
                ApiError::invalid(format!("the JSON patch could not be applied: {err}"))
            })?;
        }
    }
    Ok(patched)
}

/// A strategic merge patch without its `$`-prefixed directive keys.
fn without_directives(patch: &Value) -> Value {
    match patch {
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .filter(|(key, _)| !key.starts_with('$'))
                .map(|(key, value)| (key.clone(), without_directives(value)))
                .collect(),
        ),
        other => other.clone(),
    }
}
