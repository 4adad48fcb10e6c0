//! An in-process fake Kubernetes API server with real state, so kube's own `Client`, `Api`,
//! `watcher` and `Controller` run against it unmodified, and tests can read the requests made.
//!
//! # Layout
//!
//! - `route`: which resource type, namespace, object and subresource a path addresses.
//! - `resource`: what the fake knows about types (kinds, scope, status subresources).
//! - `store`: objects, the global resourceVersion, the bounded change history.
//! - `handler`: HTTP verbs onto the store; recording; injected conflicts.
//! - `patch`: merge, strategic merge, JSON patch and apply bodies.
//! - `selector`: label and field selectors.
//! - `watch`: watch streams, bookmarks, streaming-list initial events.
//! - `status`: `Status` error objects.
//! - `object`: reading and stamping object metadata.
//!
//! # Simplifications
//!
//! Objects are kept per (group, version, plural), so `v1` and `events.k8s.io/v1` Events are
//! separate stores. Strategic merge patch and server-side apply are applied as JSON merge
//! patches (no list merge keys, no removal of fields a manager stops applying, no
//! managedFields, no conflicts between managers). `limit`/`continue` are ignored: lists come in
//! one page, and a list's or get's `resourceVersion` parameter is ignored (always the latest).
//! Namespaces need not exist. Deletion is immediate (no grace periods) unless the object has
//! finalizers, and answers the deleted object (never a `Status`). A watch from a version newer
//! than the store starts at the current one. No admission, defaulting, validation or auth.

mod body;
mod handler;
mod object;
mod patch;
mod resource;
mod route;
mod selector;
mod status;
mod store;
mod watch;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::Router;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use resource::ResourceType;
use store::Store;

/// How many changes the fake remembers for watches; a watch from before them gets 410 Gone.
pub const HISTORY_LIMIT: usize = store::HISTORY_LIMIT;

/// One request as the fake received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    /// The raw query string, without `?` ("" when there is none).
    pub query: String,
    pub content_type: Option<String>,
    /// The body parsed as JSON, or as YAML for YAML media types; `None` if empty or unreadable.
    pub body: Option<Value>,
    /// When it arrived.
    pub at: std::time::Instant,
}

impl Recorded {
    /// The decoded value of a query parameter.
    pub fn query_param(&self, key: &str) -> Option<String> {
        let uri: axum::http::Uri = format!("/?{}", self.query).parse().ok()?;
        let axum::extract::Query(pairs) =
            axum::extract::Query::<Vec<(String, String)>>::try_from_uri(&uri).ok()?;
        pairs.into_iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

/// State shared by the test's handle and the server's handlers.
struct Shared {
    store: Mutex<Store>,
    requests: Mutex<Vec<Recorded>>,
    /// Writes still to fail, by resource plural: how many, and with what.
    injected: Mutex<HashMap<String, (usize, Injected)>>,
    shutdown: CancellationToken,
}

impl Shared {
    /// The store; a panic elsewhere while it was held does not make every later request panic.
    fn store(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn record(&self, request: Recorded) {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(request);
    }

    /// How this write should fail, if it should, counting it down.
    fn take_injected(&self, plural: &str) -> Option<Injected> {
        let mut injected = self.injected.lock().unwrap_or_else(PoisonError::into_inner);
        match injected.get_mut(plural) {
            Some((left, how)) if *left > 0 => {
                *left -= 1;
                Some(*how)
            }
            _ => None,
        }
    }
}

/// How an injected failure answers.
#[derive(Debug, Clone, Copy)]
enum Injected {
    /// 409 Conflict.
    Conflict,
    /// 403 Forbidden, as for a Role without the verb.
    Forbidden,
    /// 500 Internal Server Error, for reads.
    Internal,
    /// A 200 whose body never comes (until the server stops): an API server that stopped
    /// answering mid-reply.
    Hang,
    /// The call applied, then [`Injected::Hang`]'s answer: a write that landed unanswered.
    HangAfterApplying,
}

/// The fake API server; it stops (and ends its watch streams) when dropped.
pub struct FakeApiServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl FakeApiServer {
    /// Starts on a free loopback port, on the current tokio runtime.
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the fake API server to a free loopback port");
        let addr = listener
            .local_addr()
            .expect("read the fake API server's address");
        let shared = Arc::new(Shared {
            store: Mutex::new(Store::new()),
            requests: Mutex::new(Vec::new()),
            injected: Mutex::new(HashMap::new()),
            shutdown: CancellationToken::new(),
        });
        let app = Router::new()
            .fallback(handler::handle)
            .with_state(Arc::clone(&shared));
        let stopped = shared.shutdown.clone().cancelled_owned();
        tokio::spawn(async move {
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(stopped)
                .await;
            if let Err(error) = served {
                tracing::warn!(error = %error, "fake API server stopped serving");
            }
        });
        Self { addr, shared }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A kube client for this server: plain HTTP, no auth, default namespace "default".
    pub fn client(&self) -> kube::Client {
        let mut config = kube::Config::new(
            self.url()
                .parse()
                .expect("the fake API server's URL is a valid URI"),
        );
        config.default_namespace = "default".to_owned();
        kube::Client::try_from(config).expect("build a kube client for the fake API server")
    }

    /// Writes a kubeconfig for this server into `dir` (plain HTTP, no credentials, `namespace`
    /// as the context's), for a process that finds its cluster the way kubectl does
    /// (`KUBECONFIG`); its path.
    pub fn write_kubeconfig(&self, dir: &std::path::Path, namespace: &str) -> std::path::PathBuf {
        let path = dir.join("kubeconfig");
        let server = self.url();
        let config = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {server}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n    namespace: {namespace}\ncurrent-context: fake\nusers:\n- name: fake\n  user: {{}}\n"
        );
        std::fs::write(&path, config).expect("write the kubeconfig");
        path
    }

    /// Puts an object into the store as if someone else had created it: uid, resourceVersion,
    /// creationTimestamp and generation are set like a create would, and watchers see ADDED.
    /// If the object exists, it is replaced whatever its resourceVersion (watchers see
    /// MODIFIED), `.status` included. A namespaced object without a namespace goes to
    /// "default". Returns the stored object.
    pub fn insert<K>(&self, obj: &K) -> K
    where
        K: kube::Resource<DynamicType = ()> + Serialize + DeserializeOwned,
    {
        let resource = ResourceType::of::<K>();
        let mut value = serde_json::to_value(obj).expect("the inserted object serializes to JSON");
        let namespace = match obj.meta().namespace.as_deref() {
            Some(namespace) => namespace.to_owned(),
            None if resource.is_cluster_scoped() => String::new(),
            None => "default".to_owned(),
        };
        let name = obj.meta().name.clone().unwrap_or_default();
        let mut store = self.shared.store();
        let stored = if store.get(&resource, &namespace, &name).is_some() {
            if let Some(meta) = object::metadata_mut(&mut value) {
                meta.remove("resourceVersion");
                meta.remove("uid");
            }
            store.update(&resource, &namespace, &name, value, false)
        } else {
            store.create(&resource, &namespace, value, false)
        };
        let stored = stored.unwrap_or_else(|error| {
            panic!(
                "insert {} {namespace}/{name}: {}",
                resource.qualified(),
                error.message()
            )
        });
        decode(&resource, stored)
    }

    /// The stored object (`namespace` "" for cluster-scoped ones), if there is one.
    pub fn get<K>(&self, namespace: &str, name: &str) -> Option<K>
    where
        K: kube::Resource<DynamicType = ()> + DeserializeOwned,
    {
        let resource = ResourceType::of::<K>();
        let stored = self
            .shared
            .store()
            .get(&resource, namespace, name)
            .cloned()?;
        Some(decode(&resource, stored))
    }

    /// All objects of a kind in a namespace, by name.
    pub fn list<K>(&self, namespace: &str) -> Vec<K>
    where
        K: kube::Resource<DynamicType = ()> + DeserializeOwned,
    {
        let resource = ResourceType::of::<K>();
        let stored: Vec<Value> = self
            .shared
            .store()
            .list(&resource, Some(namespace))
            .cloned()
            .collect();
        stored.into_iter().map(|o| decode(&resource, o)).collect()
    }

    /// Deletes an object at once, finalizers or not; watchers see DELETED. Absent is fine.
    pub fn remove<K>(&self, namespace: &str, name: &str)
    where
        K: kube::Resource<DynamicType = ()>,
    {
        let resource = ResourceType::of::<K>();
        self.shared.store().remove(&resource, namespace, name);
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Makes the next `n` writes (POST, PUT, PATCH, DELETE) to this resource plural, in any
    /// group, answer 409 Conflict without touching the store.
    pub fn fail_next_writes(&self, plural: &str, n: usize) {
        self.inject(plural, n, Injected::Conflict);
    }

    /// Makes the next `n` writes to this resource plural answer 403 Forbidden, as the API does
    /// for a Role without the verb.
    pub fn forbid_next_writes(&self, plural: &str, n: usize) {
        self.inject(plural, n, Injected::Forbidden);
    }

    /// Makes the next `n` reads (GET, one object or a list, not a watch) of this resource
    /// plural answer 500 Internal Server Error (not a 503, which kube's client retries).
    pub fn fail_next_reads(&self, plural: &str, n: usize) {
        self.inject(&format!("read {plural}"), n, Injected::Internal);
    }

    /// Makes the next `n` writes to this resource plural, and with `reads` its next `n` reads
    /// (not watches), never finish: the reply's body never comes.
    pub fn hang_next_calls(&self, plural: &str, n: usize, reads: bool) {
        self.inject(plural, n, Injected::Hang);
        if reads {
            self.inject(&format!("read {plural}"), n, Injected::Hang);
        }
    }

    /// Makes the next `n` lists (not gets, not watches) of this resource plural never finish.
    pub fn hang_next_lists(&self, plural: &str, n: usize) {
        self.inject(&format!("list {plural}"), n, Injected::Hang);
    }

    /// Makes the next `n` lists (not gets, not watches) of this resource plural answer 403
    /// Forbidden, as the API does for a Role without `list`.
    pub fn forbid_next_lists(&self, plural: &str, n: usize) {
        self.inject(&format!("list {plural}"), n, Injected::Forbidden);
    }

    /// Makes the next `n` writes to this resource plural land in the store, and their answers
    /// never come.
    pub fn hang_next_writes_after_applying(&self, plural: &str, n: usize) {
        self.inject(plural, n, Injected::HangAfterApplying);
    }

    fn inject(&self, plural: &str, n: usize, how: Injected) {
        self.shared
            .injected
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(plural.to_owned(), (n, how));
    }

    /// The store's current resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.store().resource_version()
    }
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        self.shared.shutdown.cancel();
    }
}

fn decode<K: DeserializeOwned>(resource: &ResourceType, stored: Value) -> K {
    serde_json::from_value(stored).unwrap_or_else(|error| {
        panic!(
            "the stored {} does not decode as the requested type: {error}",
            resource.qualified()
        )
    })
}
