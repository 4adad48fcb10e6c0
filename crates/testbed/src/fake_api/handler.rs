//! The HTTP side: records every request, injects failures, and dispatches by verb and path to
//! the store, answering objects, lists, watch streams or `Status` errors.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::body::{decode_body, media_type};
use super::object;
use super::patch::{self, PatchKind};
use super::route::Route;
use super::selector::Selector;
use super::status::ApiError;
use super::store::{Preconditions, Store};
use super::watch::{self, Start, WatchRequest};
use super::{Injected, Recorded, Shared};

/// How long a watch without `timeoutSeconds` lasts (the real server picks 30 to 60 minutes).
const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);

/// Every request lands here.
pub async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let media_type = content_type.as_deref().map(media_type);
    let decoded = decode_body(media_type.as_deref(), &body);
    shared.record(Recorded {
        method: method.to_string(),
        path: uri.path().to_owned(),
        query: uri.query().unwrap_or_default().to_owned(),
        content_type: content_type.clone(),
        body: decoded.as_ref().ok().cloned().flatten(),
        at: std::time::Instant::now(),
    });
    match serve(
        &shared,
        &method,
        &uri,
        &headers,
        media_type.as_deref(),
        decoded,
    ) {
        Ok(response) => response,
        Err(error) => error.into_response(),
    }
}

/// One parsed request.
struct Call<'a> {
    route: Route,
    query: HashMap<String, String>,
    media_type: Option<&'a str>,
    body: Result<Option<Value>, ApiError>,
    metadata_only: bool,
}

fn serve(
    shared: &Arc<Shared>,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    media_type: Option<&str>,
    body: Result<Option<Value>, ApiError>,
) -> Result<Response, ApiError> {
    if uri.path() == "/version" {
        return Ok(Json(version()).into_response());
    }
    let route = Route::parse(uri.path()).ok_or_else(ApiError::no_route)?;
    let query = Query::<Vec<(String, String)>>::try_from_uri(uri)
        .map_err(|err| ApiError::bad_request(format!("invalid query string: {err}")))?
        .0
        .into_iter()
        .collect();
    let metadata_only = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.contains("as=PartialObjectMetadata"));
    let call = Call {
        route,
        query,
        media_type,
        body,
        metadata_only,
    };
    if !matches!(call.route.subresource.as_deref(), None | Some("status")) {
        return Err(ApiError::no_route());
    }

    let is_write = [Method::POST, Method::PUT, Method::PATCH, Method::DELETE].contains(method);
    let plural = &call.route.resource.plural;
    let injected = if is_write {
        shared.take_injected(plural)
    } else if !call.is_watch() {
        let listing = call.route.name.is_none();
        (listing.then(|| shared.take_injected(&format!("list {plural}"))))
            .flatten()
            .or_else(|| shared.take_injected(&format!("read {plural}")))
    } else {
        None
    };
    let name = call.route.name.as_deref().unwrap_or_default();
    match injected {
        Some(Injected::Conflict) => {
            return Err(ApiError::conflict_because(
                &call.route.resource,
                name,
                "injected by FakeApiServer::fail_next_writes",
            ));
        }
        Some(Injected::Forbidden) => return Err(ApiError::forbidden(&call.route.resource, name)),
        Some(Injected::Internal) => return Err(ApiError::internal(&call.route.resource, name)),
        Some(Injected::Hang) => return Ok(hung(shared)),
        Some(Injected::HangAfterApplying) | None => {}
    }

    let named = call.route.name.is_some();
    let answer = match (method.clone(), named) {
        (Method::GET, false) if call.is_watch() => call.watch(shared),
        (Method::GET, false) => call.list(shared),
        (Method::GET, true) => call.get(shared),
        (Method::POST, false) => call.create(shared),
        (Method::PUT, true) => call.replace(shared),
        (Method::PATCH, true) => call.patch(shared),
        (Method::DELETE, true) => call.delete(shared),
        (Method::DELETE, false) => call.delete_collection(shared),
        (other, _) => Err(ApiError::method_not_allowed(other.as_str())),
    };
    match injected {
        Some(Injected::HangAfterApplying) => answer.map(|_| hung(shared)),
        _ => answer,
    }
}

/// A 200 whose body never comes, until the server stops.
fn hung(shared: &Arc<Shared>) -> Response {
    let stopped = shared.shutdown.clone().cancelled_owned();
    let never = futures_util::stream::once(stopped)
        .filter_map(|()| async { None::<Result<Bytes, std::io::Error>> });
    axum::body::Body::from_stream(never).into_response()
}

impl Call<'_> {
    fn param(&self, key: &str) -> Option<&str> {
        self.query
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    fn flag(&self, key: &str) -> Option<bool> {
        self.param(key).map(|v| v == "true" || v == "1")
    }

    fn is_watch(&self) -> bool {
        self.flag("watch") == Some(true)
    }

    fn dry_run(&self) -> bool {
        self.param("dryRun") == Some("All")
    }

    fn selector(&self) -> Result<Selector, ApiError> {
        Selector::parse(self.param("labelSelector"), self.param("fieldSelector"))
    }

    /// The namespace a named object lives in ("" for cluster-scoped ones).
    fn namespace(&self) -> &str {
        self.route.namespace.as_deref().unwrap_or_default()
    }

    fn name(&self) -> &str {
        self.route.name.as_deref().unwrap_or_default()
    }

    fn is_status(&self) -> bool {
        self.route.subresource.as_deref() == Some("status")
    }

    /// The object as this client wants to see it.
    fn view(&self, object: &Value) -> Value {
        if self.metadata_only {
            object::partial_metadata(object)
        } else {
            object.clone()
        }
    }

    /// The decoded body of a create or replace: JSON or YAML, required.
    fn object_body(&self) -> Result<Value, ApiError> {
        match self.media_type {
            Some("application/json" | "application/yaml") => {}
            other => return Err(ApiError::unsupported_media_type(other)),
        }
        self.required_body()
    }

    fn required_body(&self) -> Result<Value, ApiError> {
        match &self.body {
            Ok(Some(body)) => Ok(body.clone()),
            Ok(None) => Err(ApiError::bad_request("the request needs a body")),
            Err(error) => Err(error.clone()),
        }
    }

    fn get(&self, shared: &Shared) -> Result<Response, ApiError> {
        let store = shared.store();
        let object = store
            .get(&self.route.resource, self.namespace(), self.name())
            .ok_or_else(|| ApiError::not_found(&self.route.resource, self.name()))?;
        Ok(Json(self.view(object)).into_response())
    }

    fn list(&self, shared: &Shared) -> Result<Response, ApiError> {
        let selector = self.selector()?;
        let store = shared.store();
        let items: Vec<Value> = store
            .list(&self.route.resource, self.route.namespace.as_deref())
            .filter(|o| selector.matches(o))
            .map(|o| self.view(o))
            .collect();
        let (api_version, kind) = if self.metadata_only {
            (
                "meta.k8s.io/v1".to_owned(),
                "PartialObjectMetadataList".to_owned(),
            )
        } else {
            let kind = store.kind(&self.route.resource);
            (self.route.resource.api_version(), format!("{kind}List"))
        };
        Ok(Json(json!({
            "apiVersion": api_version,
            "kind": kind,
            "metadata": { "resourceVersion": store.resource_version().to_string() },
            "items": items,
        }))
        .into_response())
    }

    fn watch(&self, shared: &Arc<Shared>) -> Result<Response, ApiError> {
        let start = match self.param("resourceVersion") {
            None | Some("0") => Start::Now,
            Some(version) => Start::After(version.parse().map_err(|_| {
                ApiError::bad_request(format!("invalid resourceVersion {version:?}: not a number"))
            })?),
        };
        // As on the real server, an unset or zero timeoutSeconds means the server's default.
        let timeout = match self.param("timeoutSeconds") {
            None | Some("0") => DEFAULT_WATCH_TIMEOUT,
            Some(seconds) => Duration::from_secs(seconds.parse().map_err(|_| {
                ApiError::bad_request(format!("invalid timeoutSeconds {seconds:?}"))
            })?),
        };
        let request = WatchRequest {
            resource: self.route.resource.clone(),
            namespace: self.route.namespace.clone(),
            selector: self.selector()?,
            start,
            send_initial_events: self.flag("sendInitialEvents"),
            bookmarks: self.flag("allowWatchBookmarks") == Some(true),
            timeout,
            metadata_only: self.metadata_only,
        };
        Ok(watch::respond(Arc::clone(shared), request))
    }

    fn create(&self, shared: &Shared) -> Result<Response, ApiError> {
        let body = self.object_body()?;
        let namespace = self.namespace_for_create(&body)?;
        let created =
            shared
                .store()
                .create(&self.route.resource, &namespace, body, self.dry_run())?;
        Ok((StatusCode::CREATED, Json(self.view(&created))).into_response())
    }

    /// The path's namespace; a body naming another one is refused, as on the real server.
    fn namespace_for_create(&self, body: &Value) -> Result<String, ApiError> {
        let in_body = object::meta_text(body, "namespace");
        match (&self.route.namespace, in_body) {
            (Some(path), Some(body)) if path != body => Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            )),
            (Some(path), _) => Ok(path.clone()),
            (None, body) => Ok(body.unwrap_or_default().to_owned()),
        }
    }

    fn replace(&self, shared: &Shared) -> Result<Response, ApiError> {
        let body = self.object_body()?;
        let mut store = shared.store();
        let stored = store.existing(&self.route.resource, self.namespace(), self.name())?;
        self.update(&mut store, &stored, body)
    }

    /// Writes `written` over `stored` as far as this request may change it (see
    /// [`proposal`](Self::proposal)), and answers the object as it is then.
    fn update(
        &self,
        store: &mut Store,
        stored: &Value,
        written: Value,
    ) -> Result<Response, ApiError> {
        let proposal = self.proposal(stored, written);
        let updated = store.update(
            &self.route.resource,
            self.namespace(),
            self.name(),
            proposal,
            self.dry_run(),
        )?;
        Ok(Json(self.view(&updated)).into_response())
    }

    /// What a write to the object or its status subresource may change: through `/status`,
    /// only `.status` (and the resourceVersion precondition); on the object itself, everything
    /// but `.status` for types with a status subresource, everything for the others.
    fn proposal(&self, stored: &Value, written: Value) -> Value {
        if self.is_status() {
            let mut proposal = stored.clone();
            object::copy_status(&mut proposal, &written);
            if let Some(meta) = object::metadata_mut(&mut proposal) {
                match object::resource_version(&written) {
                    Some(version) => meta.insert("resourceVersion".to_owned(), json!(version)),
                    None => meta.remove("resourceVersion"),
                };
            }
            proposal
        } else if self.route.resource.has_status_subresource() {
            let mut proposal = written;
            object::copy_status(&mut proposal, stored);
            proposal
        } else {
            written
        }
    }

    fn patch(&self, shared: &Shared) -> Result<Response, ApiError> {
        let kind = PatchKind::from_media_type(self.media_type)?;
        if kind == PatchKind::Apply && self.param("fieldManager").is_none() {
            return Err(ApiError::invalid(
                "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
            ));
        }
        let body = self.required_body()?;
        let mut store = shared.store();
        let stored = store
            .get(&self.route.resource, self.namespace(), self.name())
            .cloned();
        let Some(stored) = stored else {
            if kind == PatchKind::Apply && !self.is_status() {
                return self.create_by_apply(&mut store, body);
            }
            return Err(ApiError::not_found(&self.route.resource, self.name()));
        };
        let patched = patch::apply(kind, &stored, &body)?;
        self.update(&mut store, &stored, patched)
    }

    /// Server-side apply of an absent object creates it, named by the path.
    fn create_by_apply(&self, store: &mut Store, mut body: Value) -> Result<Response, ApiError> {
        let meta = object::metadata_mut(&mut body)
            .ok_or_else(|| ApiError::bad_request("the applied configuration must be an object"))?;
        match object::text(meta, "name") {
            Some(name) if name != self.name() => {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({name}) does not match the name on the URL ({})",
                    self.name()
                )));
            }
            Some(_) => {}
            None => {
                meta.insert("name".to_owned(), json!(self.name()));
            }
        }
        let namespace = self.namespace_for_create(&body)?;
        let created = store.create(&self.route.resource, &namespace, body, self.dry_run())?;
        Ok((StatusCode::CREATED, Json(self.view(&created))).into_response())
    }

    fn delete(&self, shared: &Shared) -> Result<Response, ApiError> {
        if self.is_status() {
            return Err(ApiError::method_not_allowed("DELETE"));
        }
        let (preconditions, dry_run) = self.delete_options()?;
        let deleted = shared.store().delete(
            &self.route.resource,
            self.namespace(),
            self.name(),
            &preconditions,
            dry_run,
        )?;
        Ok(Json(self.view(&deleted)).into_response())
    }

    fn delete_collection(&self, shared: &Shared) -> Result<Response, ApiError> {
        let selector = self.selector()?;
        let (_, dry_run) = self.delete_options()?;
        let mut store = shared.store();
        let doomed: Vec<(String, String)> = store
            .list(&self.route.resource, self.route.namespace.as_deref())
            .filter(|o| selector.matches(o))
            .map(|o| {
                let namespace = object::meta_text(o, "namespace").unwrap_or_default();
                let name = object::meta_text(o, "name").unwrap_or_default();
                (namespace.to_owned(), name.to_owned())
            })
            .collect();
        let mut items = Vec::new();
        for (namespace, name) in doomed {
            let deleted = store.delete(
                &self.route.resource,
                &namespace,
                &name,
                &Preconditions::default(),
                dry_run,
            )?;
            items.push(self.view(&deleted));
        }
        let kind = format!("{}List", store.kind(&self.route.resource));
        Ok(Json(json!({
            "apiVersion": self.route.resource.api_version(),
            "kind": kind,
            "metadata": { "resourceVersion": store.resource_version().to_string() },
            "items": items,
        }))
        .into_response())
    }

    /// Preconditions and dry run from the DeleteOptions body and the query.
    fn delete_options(&self) -> Result<(Preconditions, bool), ApiError> {
        let options = match &self.body {
            Ok(Some(options)) => options.clone(),
            Ok(None) => Value::Null,
            Err(error) => return Err(error.clone()),
        };
        let precondition = |field: &str| {
            options
                .get("preconditions")
                .and_then(|p| p.get(field))
                .and_then(Value::as_str)
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        let preconditions = Preconditions {
            resource_version: precondition("resourceVersion"),
            uid: precondition("uid"),
        };
        let dry_run_in_body = options
            .get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|modes| modes.iter().any(|m| m == "All"));
        Ok((preconditions, self.dry_run() || dry_run_in_body))
    }
}

/// What `GET /version` answers, so `Client::apiserver_version` works.
fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": "v1.33.0-testbed-fake",
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "",
        "goVersion": "",
        "compiler": "",
        "platform": "linux/amd64",
    })
}
