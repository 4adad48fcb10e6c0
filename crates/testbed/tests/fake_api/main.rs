//! The fake API server proven with kube's real client, watcher and controller: CRUD, optimistic
//! concurrency, patches, selectors, watches, a controller, and injected conflicts.

mod bad_requests;
mod controller;
mod events;
mod fixtures;
mod groups;
mod handle;
mod patches;
mod selectors;
mod watches;
mod writes;
