//! Reads across namespaces bounded by the consumer's provider RBAC, one
//! namespace at a time. A consumer's list or watch of a namespaced resource
//! across all its namespaces goes to the provider as bindery (no RBAC can
//! grant one consumer its objects of every namespace), narrowed by the
//! identity label selector. Before it goes, each provider namespace the
//! consumer has is reviewed for the consumer's account, and those it may
//! not read (`list` or `watch`) are closed in the request's namespace map:
//! their objects are no consumer's, and never reach the caller, whether
//! the provider or the shared cache answers. So the answer is the union of
//! what the account may read namespace by namespace, as the provider's RBAC
//! allows it, even if the map or the identity is wrong.

use super::access::{Access, Attempt};
use crate::translate::BoundResource;
use futures::StreamExt;
use std::time::Duration;

/// How long a namespace the account may not read yet is waited for: RBAC
/// made with the namespace reaches the provider's authorizer in moments.
const PATIENCE: Duration = Duration::from_secs(2);
/// How often a namespace not allowed yet is asked about again.
const POLL: Duration = Duration::from_millis(200);
/// How many namespaces are reviewed at once.
const AT_ONCE: usize = 8;

/// The provider namespaces among `namespaces` that `bound`'s consumer's
/// account may not make `verb` (`list`, `watch`) in: reviewed (allowing
/// reviews are kept, see [`Access::may`]), and those refused asked about
/// again for a moment, as RBAC made with a namespace may still be on its
/// way.
pub async fn unreadable(
    access: &Access,
    bound: &BoundResource,
    verb: &'static str,
    namespaces: Vec<String>,
) -> Vec<String> {
    let until = tokio::time::Instant::now() + PATIENCE;
    futures::stream::iter(namespaces)
        .map(|namespace| async move {
            let attempt = Attempt {
                verb,
                group: bound.group.clone(),
                resource: bound.resource.clone(),
                subresource: None,
                namespace: Some(namespace.clone()),
                name: None,
            };
            loop {
                if access.may(bound, &attempt).await {
                    return None;
                }
                if tokio::time::Instant::now() + POLL >= until {
                    return Some(namespace);
                }
                tokio::time::sleep(POLL).await;
            }
        })
        .buffer_unordered(AT_ONCE)
        .filter_map(std::future::ready)
        .collect()
        .await
}
