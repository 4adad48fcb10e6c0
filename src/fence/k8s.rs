//! Fencing Kubernetes objects: the token of the last write lives in an annotation of the object
//! itself, and the write is a replace with the resourceVersion of the read as its precondition.
//! The API server refuses (409) a write whose object changed since the read, so the read, the
//! token comparison and the write act as one step: a newer leader's write in between makes the
//! older one fail, and the next read shows the newer token, which refuses it for good.
//!
//! Call [`Leadership::check`](crate::elector::Leadership::check) for the token right before,
//! as in `examples/fenced_reconciler.rs` (a reconciler under
//! [`reconcile_while_leading`](crate::k8s::reconcile_while_leading)).

use std::fmt::Debug;

use kube::api::PostParams;
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{FenceError, admits};
use crate::lease::FencingToken;

/// The annotation that holds the token of the object's last fenced write.
pub const ANNOTATION: &str = "leasehold.io/fencing-token";

/// Reads `name`, refuses if its annotation holds a higher token than `token`, applies `mutate`,
/// stamps `token` into the annotation, and replaces the object on the resourceVersion it was
/// read at. [`FenceError::Conflict`] when it changed meanwhile (read again: requeue).
pub async fn replace<K>(
    api: &Api<K>,
    name: &str,
    token: FencingToken,
    mutate: impl FnOnce(&mut K),
) -> Result<K, FenceError>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    let mut object = api.get(name).await.map_err(FenceError::Kubernetes)?;
    let seen = stored_token(&object, name)?;
    if !admits(seen, token) {
        return Err(FenceError::Stale {
            resource: name.to_owned(),
            seen: seen.unwrap_or(token),
            offered: token,
        });
    }
    let read_at = object.meta().resource_version.clone();
    if read_at.is_none() {
        // Without a resourceVersion the replace would be unconditional.
        return Err(FenceError::Conflict {
            resource: name.to_owned(),
        });
    }
    mutate(&mut object);
    object.meta_mut().resource_version = read_at;
    object
        .annotations_mut()
        .insert(ANNOTATION.to_owned(), token.to_string());
    match api.replace(name, &PostParams::default(), &object).await {
        Ok(written) => Ok(written),
        Err(kube::Error::Api(status)) if status.is_conflict() => Err(FenceError::Conflict {
            resource: name.to_owned(),
        }),
        Err(err) => Err(FenceError::Kubernetes(err)),
    }
}

/// The token in `object`'s annotation, if it has one.
pub fn stored_token<K: Resource>(
    object: &K,
    name: &str,
) -> Result<Option<FencingToken>, FenceError> {
    let Some(stored) = object.annotations().get(ANNOTATION) else {
        return Ok(None);
    };
    match stored.parse() {
        Ok(token) => Ok(Some(FencingToken(token))),
        Err(_) => Err(FenceError::Unreadable {
            resource: name.to_owned(),
            stored: stored.clone(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn annotated(value: Option<&str>) -> ConfigMap {
        let mut cm = ConfigMap::default();
        if let Some(value) = value {
            cm.annotations_mut()
                .insert(ANNOTATION.to_owned(), value.to_owned());
        }
        cm
    }

    #[test]
    fn the_stored_token_is_read_from_the_annotation() {
        assert_eq!(stored_token(&annotated(None), "x").unwrap(), None);
        assert_eq!(
            stored_token(&annotated(Some("42")), "x").unwrap(),
            Some(FencingToken(42))
        );
        assert!(matches!(
            stored_token(&annotated(Some("forty")), "x"),
            Err(FenceError::Unreadable { .. })
        ));
    }
}
