//! Kubernetes `Status` objects: how the fake answers failures, in the shape kube parses into
//! `kube::Error::Api` (and, inside a watch stream, into an `ERROR` event).

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::resource::ResourceType;

/// What the real server says when a write lost an optimistic-concurrency race.
const MODIFIED: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

/// A failed request, answered as a `Status` with `status: Failure`.
#[derive(Debug, Clone)]
pub struct ApiError {
    code: StatusCode,
    reason: &'static str,
    message: String,
    details: Option<Value>,
}

impl ApiError {
    fn new(code: StatusCode, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    fn about(mut self, resource: &ResourceType, name: &str) -> Self {
        self.details = Some(json!({
            "name": name,
            "group": resource.group,
            "kind": resource.plural,
        }));
        self
    }

    /// 404 for an object that does not exist.
    pub fn not_found(resource: &ResourceType, name: &str) -> Self {
        let message = format!("{} \"{name}\" not found", resource.qualified());
        Self::new(StatusCode::NOT_FOUND, "NotFound", message).about(resource, name)
    }

    /// 404 for a path the fake does not serve.
    pub fn no_route() -> Self {
        let message = "the server could not find the requested resource";
        Self::new(StatusCode::NOT_FOUND, "NotFound", message)
    }

    /// 409 for a create whose name is taken.
    pub fn already_exists(resource: &ResourceType, name: &str) -> Self {
        let message = format!("{} \"{name}\" already exists", resource.qualified());
        Self::new(StatusCode::CONFLICT, "AlreadyExists", message).about(resource, name)
    }

    /// 409 for a write whose resourceVersion (or uid) precondition does not hold.
    pub fn conflict(resource: &ResourceType, name: &str) -> Self {
        Self::conflict_because(resource, name, MODIFIED)
    }

    /// 409 with the reason spelled out.
    pub fn conflict_because(resource: &ResourceType, name: &str, why: &str) -> Self {
        let message = format!(
            "Operation cannot be fulfilled on {} \"{name}\": {why}",
            resource.qualified()
        );
        Self::new(StatusCode::CONFLICT, "Conflict", message).about(resource, name)
    }

    /// 403 for a caller whose Role lacks the verb.
    pub fn forbidden(resource: &ResourceType, name: &str) -> Self {
        let message = format!(
            "{} \"{name}\" is forbidden: the caller's Role does not allow this verb",
            resource.qualified()
        );
        Self::new(StatusCode::FORBIDDEN, "Forbidden", message).about(resource, name)
    }

    /// 500 for a server that fails to answer (etcd away); kube's client does not retry it.
    pub fn internal(resource: &ResourceType, name: &str) -> Self {
        let message = format!(
            "{} \"{name}\": an internal error occurred",
            resource.qualified()
        );
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", message).about(resource, name)
    }

    /// 422 for a well-formed request the server refuses to act on.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, "Invalid", message)
    }

    /// 400 for a malformed request.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "BadRequest", message)
    }

    /// 415 for a body in a format the fake does not read.
    pub fn unsupported_media_type(content_type: Option<&str>) -> Self {
        let message = format!(
            "the body of the request was in an unknown format ({}) - accepted media types \
             include: application/json, application/yaml, application/merge-patch+json, \
             application/strategic-merge-patch+json, application/json-patch+json, \
             application/apply-patch+yaml",
            content_type.unwrap_or("no Content-Type")
        );
        Self::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            message,
        )
    }

    /// 405 for a verb the addressed path does not take.
    pub fn method_not_allowed(method: &str) -> Self {
        let message =
            format!("the server does not allow this method on the requested resource ({method})");
        Self::new(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed", message)
    }

    /// 410 for a watch that starts before the oldest change still remembered.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(StatusCode::GONE, "Expired", message)
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    /// The `Status` object itself.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code.as_u16(),
        });
        if let (Some(details), Some(fields)) = (&self.details, status.as_object_mut()) {
            fields.insert("details".to_owned(), details.clone());
        }
        status
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.code, Json(self.to_status())).into_response()
    }
}
