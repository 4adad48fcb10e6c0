//! Reading and stamping the metadata of objects kept as JSON.

use serde_json::{Map, Value, json};

use super::resource::ResourceType;

/// The object's `metadata`, if it has one.
pub fn metadata(object: &Value) -> Option<&Map<String, Value>> {
    object.get("metadata")?.as_object()
}

/// The object's `metadata`, created empty if missing; `None` if the object is not a JSON object
/// or its metadata is not one.
pub fn metadata_mut(object: &mut Value) -> Option<&mut Map<String, Value>> {
    object
        .as_object_mut()?
        .entry("metadata")
        .or_insert_with(|| json!({}))
        .as_object_mut()
}

/// A non-empty string field of a metadata map.
pub fn text<'a>(meta: &'a Map<String, Value>, field: &str) -> Option<&'a str> {
    meta.get(field)?.as_str().filter(|s| !s.is_empty())
}

/// A non-empty string field of the object's metadata.
pub fn meta_text<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    text(metadata(object)?, field)
}

pub fn resource_version(object: &Value) -> Option<&str> {
    meta_text(object, "resourceVersion")
}

/// The label value for `key`, if the label is set.
pub fn label<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    metadata(object)?.get("labels")?.get(key)?.as_str()
}

/// Whether a deletion waits for finalizers.
pub fn has_finalizers(object: &Value) -> bool {
    metadata(object)
        .and_then(|meta| meta.get("finalizers"))
        .and_then(Value::as_array)
        .is_some_and(|finalizers| !finalizers.is_empty())
}

/// Whether a deletion was asked for and waits for finalizers.
pub fn is_terminating(object: &Value) -> bool {
    meta_text(object, "deletionTimestamp").is_some()
}

/// Sets `apiVersion` and `kind` where the object leaves them out.
pub fn fill_type(object: &mut Value, resource: &ResourceType, kind: &str) {
    let Some(fields) = object.as_object_mut() else {
        return;
    };
    for (field, value) in [
        ("apiVersion", resource.api_version()),
        ("kind", kind.to_owned()),
    ] {
        let missing = fields
            .get(field)
            .and_then(Value::as_str)
            .is_none_or(str::is_empty);
        if missing {
            fields.insert(field.to_owned(), Value::String(value));
        }
    }
}

/// Replaces `target`'s `.status` with `source`'s (removing it when `source` has none).
pub fn copy_status(target: &mut Value, source: &Value) {
    let Some(fields) = target.as_object_mut() else {
        return;
    };
    match source.get("status") {
        Some(status) => fields.insert("status".to_owned(), status.clone()),
        None => fields.remove("status"),
    };
}

/// The same object as a `PartialObjectMetadata`, for clients that ask for metadata only.
pub fn partial_metadata(object: &Value) -> Value {
    json!({
        "apiVersion": "meta.k8s.io/v1",
        "kind": "PartialObjectMetadata",
        "metadata": object.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// Now, in RFC 3339 UTC to the second, as Kubernetes writes timestamps.
pub fn now_rfc3339() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}
