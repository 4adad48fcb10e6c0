//! An HTTP service that fences its writes: every write carries the writer's fencing token in the
//! `Leasehold-Fencing-Token` header, and the service refuses a token lower than the highest it
//! has accepted, with 409 Conflict, before anything is written. docs/FENCING.md quotes it.
//!
//! ```text
//! cargo run --example fenced_http -- 127.0.0.1:8080
//! curl -X PUT -H "Leasehold-Fencing-Token: 7" --data 'hello' http://127.0.0.1:8080/items/a
//! ```
//!
//! The highest token lives in memory next to the items, which is enough for an example; a real
//! service keeps it where it keeps the data, updated in the same transaction (the PostgreSQL
//! recipe does exactly that).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::put;
use axum::{Json, Router};
use serde_json::json;

/// The request header that carries the writer's fencing token.
pub const FENCING_TOKEN_HEADER: &str = "leasehold-fencing-token";

#[derive(Default)]
struct Store {
    /// The highest fencing token that wrote.
    highest: Option<u64>,
    items: BTreeMap<String, String>,
}

type Shared = Arc<Mutex<Store>>;

/// `PUT /items/{name}` (fenced) and `GET /items/{name}`.
pub fn router() -> Router {
    Router::new()
        .route("/items/{name}", put(put_item).get(get_item))
        .with_state(Shared::default())
}

async fn put_item(
    State(store): State<Shared>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let offered = match fencing_token(&headers) {
        Ok(token) => token,
        Err(refusal) => return refusal,
    };
    // The check and the write under one lock: no other write can come between them.
    let mut store = store.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(seen) = store.highest
        && offered < seen
    {
        let refusal = json!({ "error": "stale fencing token", "offered": offered, "seen": seen });
        return (StatusCode::CONFLICT, Json(refusal)).into_response();
    }
    store.highest = Some(offered);
    store.items.insert(name, body);
    StatusCode::NO_CONTENT.into_response()
}

/// The header's token; 428 Precondition Required without one, 400 when it is not a number.
#[allow(clippy::result_large_err)]
fn fencing_token(headers: &HeaderMap) -> Result<u64, Response> {
    let Some(value) = headers.get(FENCING_TOKEN_HEADER) else {
        let refusal = json!({ "error": "writes need a Leasehold-Fencing-Token header" });
        return Err((StatusCode::PRECONDITION_REQUIRED, Json(refusal)).into_response());
    };
    match value.to_str().ok().and_then(|v| v.trim().parse().ok()) {
        Some(token) => Ok(token),
        None => {
            let refusal = json!({ "error": "Leasehold-Fencing-Token must be a decimal number" });
            Err((StatusCode::BAD_REQUEST, Json(refusal)).into_response())
        }
    }
}

async fn get_item(State(store): State<Shared>, Path(name): Path<String>) -> Response {
    let store = store.lock().unwrap_or_else(PoisonError::into_inner);
    match store.items.get(&name) {
        Some(value) => value.clone().into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8080".to_owned());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    // The bound address: with port 0 the kernel picked one.
    eprintln!("fenced_http listening on {}", listener.local_addr()?);
    axum::serve(listener, router()).await?;
    Ok(())
}
