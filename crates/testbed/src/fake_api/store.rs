//! The fake's state: objects by resource type, one global resourceVersion that every write
//! bumps, and a bounded history of changes from which watches replay.

use std::collections::{BTreeMap, HashMap, VecDeque};

use serde_json::{Map, Value, json};
use tokio::sync::watch;

use super::object::{self, text};
use super::resource::ResourceType;
use super::status::ApiError;
use ChangeKind::{Added, Deleted, Modified};

/// How many changes the history keeps; a watch from before the oldest one gets 410 Gone.
pub const HISTORY_LIMIT: usize = 1000;

/// The resourceVersion of an empty store; the first write makes it 2.
const FIRST_RESOURCE_VERSION: u64 = 1;

/// Metadata only the server sets: a replace or patch cannot change it.
const SERVER_OWNED: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "resourceVersion",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

/// One write, as watches see it.
#[derive(Debug, Clone)]
pub struct Change {
    pub resource_version: u64,
    pub resource: ResourceType,
    pub namespace: String,
    pub name: String,
    pub kind: ChangeKind,
    /// The object before the change (none for an add): a watch with a selector needs it to
    /// turn a change that leaves its selection into a DELETED.
    pub old: Option<Value>,
    /// The object after the change; for a delete, the last state with the deletion's version.
    pub object: Value,
}

/// Preconditions a delete may carry.
#[derive(Debug, Clone, Default)]
pub struct Preconditions {
    pub resource_version: Option<String>,
    pub uid: Option<String>,
}

pub struct Store {
    objects: BTreeMap<ResourceType, BTreeMap<(String, String), Value>>,
    kinds: HashMap<ResourceType, String>,
    resource_version: u64,
    history: VecDeque<Change>,
    /// Every change after this version is still in `history`.
    history_floor: u64,
    changed: watch::Sender<u64>,
}

impl Store {
    pub fn new() -> Self {
        let (changed, _) = watch::channel(FIRST_RESOURCE_VERSION);
        Self {
            objects: BTreeMap::new(),
            kinds: HashMap::new(),
            resource_version: FIRST_RESOURCE_VERSION,
            history: VecDeque::new(),
            history_floor: FIRST_RESOURCE_VERSION,
            changed,
        }
    }

    pub fn resource_version(&self) -> u64 {
        self.resource_version
    }

    /// Wakes on every write; the value is the store's resourceVersion after it.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// The kind of a type's objects: as seen on one of them, else as the fake knows or guesses.
    pub fn kind(&self, resource: &ResourceType) -> String {
        match self.kinds.get(resource) {
            Some(kind) => kind.clone(),
            None => resource.default_kind(),
        }
    }

    fn learn_kind(&mut self, resource: &ResourceType, object: &Value) {
        if let Some(kind) = object
            .get("kind")
            .and_then(Value::as_str)
            .filter(|k| !k.is_empty())
        {
            self.kinds.insert(resource.clone(), kind.to_owned());
        }
    }

    pub fn get(&self, resource: &ResourceType, namespace: &str, name: &str) -> Option<&Value> {
        self.objects
            .get(resource)?
            .get(&(namespace.to_owned(), name.to_owned()))
    }

    /// A copy of the stored object, or NotFound.
    pub fn existing(
        &self,
        resource: &ResourceType,
        namespace: &str,
        name: &str,
    ) -> Result<Value, ApiError> {
        self.get(resource, namespace, name)
            .cloned()
            .ok_or_else(|| ApiError::not_found(resource, name))
    }

    /// Objects of a type in one namespace, or in all of them, ordered by namespace then name.
    pub fn list<'a>(
        &'a self,
        resource: &ResourceType,
        namespace: Option<&'a str>,
    ) -> impl Iterator<Item = &'a Value> + 'a {
        self.objects
            .get(resource)
            .into_iter()
            .flatten()
            .filter(move |((ns, _), _)| namespace.is_none_or(|wanted| wanted == ns))
            .map(|(_, object)| object)
    }

    /// The changes after `resource_version`, oldest first, or the oldest version still
    /// remembered when the history no longer reaches back that far.
    pub fn changes_after(
        &self,
        resource_version: u64,
    ) -> Result<impl Iterator<Item = &Change>, u64> {
        if resource_version < self.history_floor {
            return Err(self.history_floor);
        }
        Ok(self
            .history
            .iter()
            .skip_while(move |c| c.resource_version <= resource_version))
    }

    /// Creates an object: names it (from `generateName` if needed) and stamps uid,
    /// creationTimestamp, generation 1 and a new resourceVersion. 409 if the name is taken.
    pub fn create(
        &mut self,
        resource: &ResourceType,
        namespace: &str,
        mut object: Value,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        self.learn_kind(resource, &object);
        let kind = self.kind(resource);
        let meta = object::metadata_mut(&mut object).ok_or_else(not_an_object)?;
        let name = match (text(meta, "name"), text(meta, "generateName")) {
            (Some(name), _) => name.to_owned(),
            (None, Some(prefix)) => self.generate_name(resource, namespace, prefix),
            (None, None) => {
                return Err(ApiError::invalid(format!(
                    "{} \"\" is invalid: metadata.name: Required value: name or generateName is required",
                    resource.qualified()
                )));
            }
        };
        if self.get(resource, namespace, &name).is_some() {
            return Err(ApiError::already_exists(resource, &name));
        }
        meta.insert("name".to_owned(), json!(name));
        if namespace.is_empty() {
            meta.remove("namespace");
        } else {
            meta.insert("namespace".to_owned(), json!(namespace));
        }
        meta.insert("uid".to_owned(), json!(uuid::Uuid::new_v4().to_string()));
        meta.insert("creationTimestamp".to_owned(), json!(object::now_rfc3339()));
        meta.insert("generation".to_owned(), json!(1));
        for field in [
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ] {
            meta.remove(field);
        }
        object::fill_type(&mut object, resource, &kind);
        if dry_run {
            return Ok(object);
        }
        Ok(self.write(resource, namespace, &name, Added, None, object))
    }

    /// Replaces a stored object with `proposal`, as a PUT or a patch would once the new state is
    /// computed. A non-empty `metadata.resourceVersion` (or `uid`) in the proposal is a
    /// precondition (409 if it differs); server-owned metadata is kept; generation grows when
    /// `.spec` changed. A proposal equal to the stored object writes nothing, as on the real
    /// server. Removing the last finalizer of a terminating object deletes it.
    pub fn update(
        &mut self,
        resource: &ResourceType,
        namespace: &str,
        name: &str,
        mut proposal: Value,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let stored = self.existing(resource, namespace, name)?;
        let stored_meta = object::metadata(&stored).cloned().unwrap_or_default();
        let meta = object::metadata_mut(&mut proposal).ok_or_else(not_an_object)?;
        if let Some(proposed) = text(meta, "name")
            && proposed != name
        {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({proposed}) does not match the name on the URL ({name})"
            )));
        }
        if let Some(proposed) = text(meta, "resourceVersion")
            && Some(proposed) != text(&stored_meta, "resourceVersion")
        {
            return Err(ApiError::conflict(resource, name));
        }
        if let Some(proposed) = text(meta, "uid")
            && Some(proposed) != text(&stored_meta, "uid")
        {
            let why = format!(
                "Precondition failed: UID in precondition: {proposed}, UID in object meta: {}",
                text(&stored_meta, "uid").unwrap_or_default()
            );
            return Err(ApiError::conflict_because(resource, name, &why));
        }
        keep_server_owned(meta, &stored_meta);
        if proposal.get("spec") != stored.get("spec") {
            let generation = stored_meta
                .get("generation")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            if let Some(meta) = object::metadata_mut(&mut proposal) {
                meta.insert("generation".to_owned(), json!(generation + 1));
            }
        }
        self.learn_kind(resource, &proposal);
        object::fill_type(&mut proposal, resource, &self.kind(resource));
        if proposal == stored || dry_run {
            return Ok(proposal);
        }
        if object::is_terminating(&proposal) && !object::has_finalizers(&proposal) {
            return Ok(self.delete_now(resource, namespace, name, stored, proposal));
        }
        Ok(self.write(resource, namespace, name, Modified, Some(stored), proposal))
    }

    /// Deletes an object, or, while it has finalizers, marks it terminating (deletionTimestamp)
    /// and leaves it for an update that removes the last finalizer. Returns the object.
    pub fn delete(
        &mut self,
        resource: &ResourceType,
        namespace: &str,
        name: &str,
        preconditions: &Preconditions,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let stored = self.existing(resource, namespace, name)?;
        if let Some(wanted) = &preconditions.resource_version
            && Some(wanted.as_str()) != object::resource_version(&stored)
        {
            return Err(ApiError::conflict(resource, name));
        }
        if let Some(wanted) = &preconditions.uid
            && Some(wanted.as_str()) != object::meta_text(&stored, "uid")
        {
            let why = format!("Precondition failed: UID in precondition: {wanted}");
            return Err(ApiError::conflict_because(resource, name, &why));
        }
        if !object::has_finalizers(&stored) {
            if dry_run {
                return Ok(stored);
            }
            let last = stored.clone();
            return Ok(self.delete_now(resource, namespace, name, stored, last));
        }
        if object::is_terminating(&stored) {
            return Ok(stored);
        }
        let mut marked = stored.clone();
        if let Some(meta) = object::metadata_mut(&mut marked) {
            meta.insert("deletionTimestamp".to_owned(), json!(object::now_rfc3339()));
            meta.insert("deletionGracePeriodSeconds".to_owned(), json!(0));
        }
        if dry_run {
            return Ok(marked);
        }
        Ok(self.write(resource, namespace, name, Modified, Some(stored), marked))
    }

    /// Deletes an object at once, finalizers or not.
    pub fn remove(
        &mut self,
        resource: &ResourceType,
        namespace: &str,
        name: &str,
    ) -> Option<Value> {
        let stored = self.get(resource, namespace, name).cloned()?;
        let last = stored.clone();
        Some(self.delete_now(resource, namespace, name, stored, last))
    }

    /// Removes the object; watchers see `last` (its final state) with the deletion's version.
    fn delete_now(
        &mut self,
        resource: &ResourceType,
        namespace: &str,
        name: &str,
        stored: Value,
        last: Value,
    ) -> Value {
        self.write(resource, namespace, name, Deleted, Some(stored), last)
    }

    /// Stores `object` as changed by `kind` from `old`, under the next resourceVersion, which it
    /// takes; returns the object as stored.
    fn write(
        &mut self,
        resource: &ResourceType,
        namespace: &str,
        name: &str,
        kind: ChangeKind,
        old: Option<Value>,
        mut object: Value,
    ) -> Value {
        let version = self.next_resource_version(&mut object);
        self.commit(Change {
            resource_version: version,
            resource: resource.clone(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            kind,
            old,
            object: object.clone(),
        });
        object
    }

    /// Takes the next global resourceVersion and writes it into the object.
    fn next_resource_version(&mut self, object: &mut Value) -> u64 {
        self.resource_version += 1;
        if let Some(meta) = object::metadata_mut(object) {
            meta.insert(
                "resourceVersion".to_owned(),
                json!(self.resource_version.to_string()),
            );
        }
        self.resource_version
    }

    fn commit(&mut self, change: Change) {
        let objects = self.objects.entry(change.resource.clone()).or_default();
        let key = (change.namespace.clone(), change.name.clone());
        match change.kind {
            ChangeKind::Deleted => {
                objects.remove(&key);
            }
            ChangeKind::Added | ChangeKind::Modified => {
                objects.insert(key, change.object.clone());
            }
        }
        self.history.push_back(change);
        while self.history.len() > HISTORY_LIMIT {
            if let Some(forgotten) = self.history.pop_front() {
                self.history_floor = forgotten.resource_version;
            }
        }
        self.changed.send_replace(self.resource_version);
    }

    /// `prefix` and five random characters, unused in the namespace.
    fn generate_name(&self, resource: &ResourceType, namespace: &str, prefix: &str) -> String {
        loop {
            let random = uuid::Uuid::new_v4().simple().to_string();
            let name = format!("{prefix}{}", &random[..5]);
            if self.get(resource, namespace, &name).is_none() {
                return name;
            }
        }
    }
}

/// Puts back the metadata only the server may set, or removes it where the stored object has none.
fn keep_server_owned(meta: &mut Map<String, Value>, stored: &Map<String, Value>) {
    for field in SERVER_OWNED {
        match stored.get(*field) {
            Some(value) => meta.insert((*field).to_owned(), value.clone()),
            None => meta.remove(*field),
        };
    }
}

fn not_an_object() -> ApiError {
    ApiError::bad_request("the object must be a JSON object with an object in metadata")
}
