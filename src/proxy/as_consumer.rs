//! Whom a request runs as: the consumer's own provider account where it
//! has one (its provider namespaces, its cluster-scoped objects), with a
//! refusal in RBAC's words waited out while its grant may be on its way;
//! bindery across namespaces, with the namespaces the account may not read
//! closed; and whether the shared cache may answer a read, as the account's
//! provider RBAC says.

use super::{Exchange, WATCH_RBAC_PATIENCE, access, gate};
use crate::forward::encode::Failure;
use crate::route::Verb;
use crate::status::ApiError;
use crate::upstream::BoxBody;
use bytes::Bytes;
use http::StatusCode;
use http_body_util::BodyExt;
use std::sync::Arc;

impl Exchange<'_> {
    /// Whether this request is made as the consumer's own account: every
    /// request in one of its provider namespaces, and every request of a
    /// cluster-scoped resource (whose grant is the account's cluster-wide,
    /// or in its cluster namespace under `Namespaced` isolation). Lists and
    /// watches across namespaces are bindery's: RBAC cannot grant one
    /// consumer's objects of every namespace, so they are narrowed to the
    /// consumer's identity and checked object by object. So are requests
    /// in a namespace the consumer has none of on the provider yet, where
    /// there is nothing to reach (a write makes it first).
    pub(super) fn impersonated(&self) -> bool {
        if self.proxy.access.is_none() {
            return false;
        }
        let bound = self.bound();
        match &self.resource.namespace {
            Some(namespace) => self.proxy.namespaces.exists(bound, namespace),
            None => !bound.namespaced,
        }
    }

    /// This request as RBAC sees it, for `verb`.
    fn attempt(&self, verb: &'static str, subresource: Option<&str>) -> access::Attempt {
        let bound = self.bound();
        access::Attempt {
            verb,
            group: bound.group.clone(),
            resource: bound.resource.clone(),
            subresource: subresource.map(str::to_string),
            namespace: match &self.resource.namespace {
                Some(namespace) => Some(bound.namespaces.to_provider(namespace)),
                None => bound
                    .provider_namespace_of_cluster_scoped()
                    .map(str::to_string),
            },
            name: self.resource.name.as_ref().map(|n| bound.provider_name(n)),
        }
    }

    /// A list or watch across namespaces, made as bindery: the provider
    /// namespaces the consumer's account may not read are closed in the
    /// view (`gate`), so their objects reach the caller from neither the
    /// provider nor the cache.
    pub(super) async fn close_unreadable_namespaces(&mut self) {
        let verb = match self.request.verb {
            Verb::List => "list",
            Verb::Watch => "watch",
            _ => return,
        };
        let bound = &self.served.bound;
        let (Some(access), None, true) = (
            &self.proxy.access,
            &self.resource.namespace,
            bound.namespaced,
        ) else {
            return;
        };
        let namespaces = self.proxy.namespaces.all(bound);
        for closed in gate::unreadable(access, bound, verb, namespaces).await {
            tracing::warn!(consumer = %bound.consumer, resource = %bound.qualified_resource(),
                "a provider namespace of the consumer's is not readable by its account: its objects are left out");
            Arc::make_mut(&mut self.view).bound.namespaces.close(closed);
        }
    }

    /// Whether the shared cache may answer this read (`verb`: list or
    /// watch) without asking the provider: a request made as the consumer
    /// only where its account may read, as the provider's review says; one
    /// of bindery's own (across namespaces) is narrowed to the identity.
    pub(super) async fn cache_may_answer(&self, verb: &'static str) -> bool {
        match (&self.proxy.access, self.impersonated()) {
            (Some(access), true) => access.may(self.bound(), &self.attempt(verb, None)).await,
            _ => true,
        }
    }

    /// Sends what `make` builds; as the consumer, a refusal is waited out
    /// while the consumer's RBAC may still be on its way, then answered in
    /// the consumer's terms.
    pub(super) async fn send_as_consumer(
        &self,
        make: impl Fn() -> Result<http::Request<Bytes>, Failure>,
        verb: &'static str,
        subresource: Option<&str>,
    ) -> Result<http::Response<BoxBody>, Failure> {
        let response = self.send(make()?).await?;
        let (true, Some(access)) = (
            response.status() == StatusCode::FORBIDDEN && self.impersonated(),
            &self.proxy.access,
        ) else {
            return Ok(response);
        };

        let bound = self.bound();
        let attempt = self.attempt(verb, subresource);
        // A watch's deadline is its whole life: RBAC on its way is waited
        // for only a short while.
        let deadline = match verb {
            "watch" => self
                .deadline
                .min(tokio::time::Instant::now() + WATCH_RBAC_PATIENCE),
            _ => self.deadline,
        };
        let settled = access.settles(bound, &attempt, deadline).await;
        let response = match settled {
            // Allowed at once: unless the refusal is in RBAC's words (its
            // authorizer had not seen the grant yet), it is the provider's
            // own (its admission, a quota of its own), answered as it came.
            access::Settled::Already => Some(kept(response).await?),
            access::Settled::Now => Some(kept(self.send(make()?).await?).await?),
            access::Settled::Never => None,
        };
        if let Some((response, body)) = response {
            let by_rbac =
                response.status() == StatusCode::FORBIDDEN && access::refused_by_rbac(bound, &body);
            match (by_rbac, settled) {
                (false, _) => return Ok(response),
                (true, access::Settled::Already) => {
                    let again = self.send(make()?).await?;
                    let (again, body) = kept(again).await?;
                    if again.status() != StatusCode::FORBIDDEN
                        || !access::refused_by_rbac(bound, &body)
                    {
                        return Ok(again);
                    }
                }
                (true, _) => {}
            }
        }
        Err(access::refused(
            bound,
            &self.user,
            verb,
            self.resource.namespace.as_deref(),
            self.resource.name.as_deref(),
        )
        .into())
    }
}

/// `response` read whole, and the same response again with its body (to
/// look at it before it is answered).
async fn kept(
    response: http::Response<BoxBody>,
) -> Result<(http::Response<BoxBody>, Bytes), Failure> {
    let (parts, body) = response.into_parts();
    let bytes = body
        .collect()
        .await
        .map(|collected| collected.to_bytes())
        .map_err(|e| ApiError::unavailable(format!("reading the provider's answer: {e}")))?;
    let again = http_body_util::Full::new(bytes.clone())
        .map_err(|never| match never {})
        .boxed_unsync();
    Ok((http::Response::from_parts(parts, again), bytes))
}
