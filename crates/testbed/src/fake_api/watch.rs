//! Watch streams: newline-delimited JSON events over a chunked response, replayed from the
//! store's history and then live, with bookmarks and streaming-list initial events.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::pending;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::{Instant, Interval, MissedTickBehavior};

use super::Shared;
use super::object;
use super::resource::ResourceType;
use super::selector::Selector;
use super::status::ApiError;
use super::store::{Change, ChangeKind, Store};

/// How often a watch that allows bookmarks gets one.
const BOOKMARK_EVERY: Duration = Duration::from_secs(1);

/// The annotation that ends the initial events of a streaming list.
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// `resourceVersion` unset or "0": from the current state.
    Now,
    /// After this resourceVersion: replay the history from there.
    After(u64),
}

/// A watch request, from its path and query.
#[derive(Debug, Clone)]
pub struct WatchRequest {
    pub resource: ResourceType,
    pub namespace: Option<String>,
    pub selector: Selector,
    pub start: Start,
    /// `sendInitialEvents`, when given.
    pub send_initial_events: Option<bool>,
    /// `allowWatchBookmarks=true`.
    pub bookmarks: bool,
    /// `timeoutSeconds`: the stream ends after it.
    pub timeout: Duration,
    /// The client asked for `PartialObjectMetadata`.
    pub metadata_only: bool,
}

/// The streaming response for a watch.
pub fn respond(shared: Arc<Shared>, request: WatchRequest) -> Response {
    let stream = Watch::begin(shared, request).into_stream();
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(stream),
    )
        .into_response()
}

struct Watch {
    shared: Arc<Shared>,
    request: WatchRequest,
    kind: String,
    changes: watch::Receiver<u64>,
    /// Every change up to this version has been looked at.
    cursor: u64,
    pending: VecDeque<Bytes>,
    finished: bool,
    deadline: Instant,
    bookmarks: Option<Interval>,
}

enum Woke {
    End,
    Changed,
    Bookmark,
}

impl Watch {
    /// Starts a watch: initial ADDED events or the replay from the requested version, then a
    /// bookmark (the streaming-list end marker if initial events were asked for).
    fn begin(shared: Arc<Shared>, request: WatchRequest) -> Self {
        let locked = Arc::clone(&shared);
        let store = locked.store();
        let bookmarks = request.bookmarks.then(|| {
            let mut ticks =
                tokio::time::interval_at(Instant::now() + BOOKMARK_EVERY, BOOKMARK_EVERY);
            ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
            ticks
        });
        let mut watch = Self {
            kind: store.kind(&request.resource),
            changes: store.subscribe(),
            cursor: store.resource_version(),
            pending: VecDeque::new(),
            finished: false,
            deadline: Instant::now() + request.timeout,
            bookmarks,
            request,
            shared,
        };
        // Unset or "0" means "from the current state", which the real server sends as ADDED
        // events, unless sendInitialEvents=false; sendInitialEvents=true always sends them.
        let initial_events = watch
            .request
            .send_initial_events
            .unwrap_or(watch.request.start == Start::Now);
        if initial_events {
            let current: Vec<Value> = store
                .list(&watch.request.resource, watch.request.namespace.as_deref())
                .filter(|o| watch.request.selector.matches(o))
                .cloned()
                .collect();
            for object in &current {
                watch.push_event("ADDED", object);
            }
        } else if let Start::After(version) = watch.request.start {
            watch.cursor = version;
            watch.catch_up(&store);
        }
        if watch.request.send_initial_events == Some(true) {
            watch.push_bookmark(true);
        } else if watch.request.bookmarks {
            watch.push_bookmark(false);
        }
        drop(store);
        watch
    }

    fn into_stream(self) -> impl Stream<Item = Result<Bytes, Infallible>> + Send + 'static {
        futures_util::stream::unfold(self, |mut watch| async move {
            loop {
                if let Some(line) = watch.pending.pop_front() {
                    return Some((Ok(line), watch));
                }
                if watch.finished {
                    return None;
                }
                watch.wait().await;
            }
        })
    }

    /// Waits for the next thing to say: changes, a bookmark, or the end.
    async fn wait(&mut self) {
        let woke = tokio::select! {
            biased;
            () = self.shared.shutdown.cancelled() => Woke::End,
            () = tokio::time::sleep_until(self.deadline) => Woke::End,
            changed = self.changes.changed() => if changed.is_ok() { Woke::Changed } else { Woke::End },
            () = tick(self.bookmarks.as_mut()) => Woke::Bookmark,
        };
        match woke {
            Woke::End => self.finished = true,
            Woke::Changed => {
                let shared = Arc::clone(&self.shared);
                let store = shared.store();
                self.catch_up(&store);
            }
            Woke::Bookmark => self.push_bookmark(false),
        }
    }

    /// Queues the events of every change after the cursor, or a 410 Gone if the history no
    /// longer reaches back to it.
    fn catch_up(&mut self, store: &Store) {
        match store.changes_after(self.cursor) {
            Err(oldest) => {
                let message = format!("too old resource version: {} ({oldest})", self.cursor);
                let status = ApiError::expired(message).to_status();
                self.push_line(&json!({ "type": "ERROR", "object": status }));
                self.finished = true;
            }
            Ok(changes) => {
                for change in changes {
                    if let Some(event) = self.event_for(change) {
                        self.push_event(event, &change.object);
                    }
                }
                self.cursor = store.resource_version();
            }
        }
    }

    /// The event type this watch sees for a change, if any. With a selector, a change into the
    /// selection is ADDED and a change out of it is DELETED, as the real server sends them.
    fn event_for(&self, change: &Change) -> Option<&'static str> {
        if change.resource != self.request.resource {
            return None;
        }
        if let Some(namespace) = &self.request.namespace
            && *namespace != change.namespace
        {
            return None;
        }
        let selected_now = self.request.selector.matches(&change.object);
        let selected_before = change
            .old
            .as_ref()
            .is_some_and(|old| self.request.selector.matches(old));
        match (change.kind, selected_before, selected_now) {
            (ChangeKind::Added, _, true) => Some("ADDED"),
            (ChangeKind::Modified, true, true) => Some("MODIFIED"),
            (ChangeKind::Modified, false, true) => Some("ADDED"),
            (ChangeKind::Modified, true, false) => Some("DELETED"),
            (ChangeKind::Deleted, _, true) => Some("DELETED"),
            _ => None,
        }
    }

    fn push_event(&mut self, event: &str, object: &Value) {
        let object = if self.request.metadata_only {
            object::partial_metadata(object)
        } else {
            object.clone()
        };
        self.push_line(&json!({ "type": event, "object": object }));
    }

    /// A BOOKMARK at the cursor: every change up to it has been sent.
    fn push_bookmark(&mut self, ends_initial_events: bool) {
        let (api_version, kind) = if self.request.metadata_only {
            (
                "meta.k8s.io/v1".to_owned(),
                "PartialObjectMetadata".to_owned(),
            )
        } else {
            (self.request.resource.api_version(), self.kind.clone())
        };
        let mut metadata = json!({ "resourceVersion": self.cursor.to_string() });
        if ends_initial_events {
            metadata["annotations"] = json!({ INITIAL_EVENTS_END: "true" });
        }
        let object = json!({ "apiVersion": api_version, "kind": kind, "metadata": metadata });
        self.push_line(&json!({ "type": "BOOKMARK", "object": object }));
    }

    fn push_line(&mut self, line: &Value) {
        let mut bytes = line.to_string().into_bytes();
        bytes.push(b'\n');
        self.pending.push_back(Bytes::from(bytes));
    }
}

/// The next bookmark tick, or never when bookmarks are off.
async fn tick(bookmarks: Option<&mut Interval>) {
    match bookmarks {
        Some(ticks) => {
            ticks.tick().await;
        }
        None => pending().await,
    }
}
