//! Authentication: who is calling, and for which consumer. Each way of
//! authenticating an app cluster's caller is an [`Authenticator`]; the
//! provider's own users (the virtual workspace, `/bind`) are recognised by
//! [`provider`]. The authentication layer (`crate::server::authn`) runs
//! them before any body is read; a caller none accepts gets 401, and the
//! [`Refusal`] saying why goes to the log only.

pub mod client_cert;
pub mod front_proxy;
pub mod provider;
pub mod refusal;
pub mod registrations;
pub mod service_account;
pub mod token_review;
pub mod trust;

pub use refusal::Refusal;

use crate::route::ConsumerId;
use std::collections::BTreeMap;

/// A verified client certificate presented on the TLS connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerCertificate {
    pub common_name: String,
    pub organizations: Vec<String>,
    /// The DER bytes, for authenticators that verify against other CAs.
    pub der: Vec<u8>,
}

/// Who a credential names, as kube-apiserver's authenticators name users:
/// what authorization asks about.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct RequestUser {
    pub name: String,
    pub uid: Option<String>,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

/// The consumers sharing the front proxy of a discovery request that named
/// none of them: its answer shows what any of them serves.
#[derive(Clone, Debug)]
pub struct SharedFrontProxy(pub Vec<ConsumerId>);

/// An authenticated caller of a consumer's endpoints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub uid: Option<String>,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
    /// The consumer this credential speaks for.
    pub consumer: ConsumerId,
    /// How the caller was authenticated, which decides how it is authorized.
    pub via: Via,
}

impl User {
    /// `identity` calling `consumer`'s endpoints, authenticated `via`.
    pub fn new(identity: RequestUser, consumer: &ConsumerId, via: Via) -> Self {
        Self {
            name: identity.name,
            uid: identity.uid,
            groups: identity.groups,
            extra: identity.extra,
            consumer: consumer.clone(),
            via,
        }
    }

    /// Who the credential names, as authorization asks about it.
    pub fn identity(&self) -> RequestUser {
        RequestUser {
            name: self.name.clone(),
            uid: self.uid.clone(),
            groups: self.groups.clone(),
            extra: self.extra.clone(),
        }
    }
}

/// An authenticated user of the provider cluster: a caller of the virtual
/// workspace or a binder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderUser(pub RequestUser);

/// How a caller was authenticated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// A consumer certificate of bindery's own CA: the consumer itself, which
    /// may do everything its export allows.
    ConsumerCertificate,
    /// The app cluster's front proxy (its aggregation layer) on behalf of
    /// one of its users: the app cluster authorizes each request.
    FrontProxy,
    /// A bearer token of the app cluster (verified locally, or reviewed by
    /// the app cluster): authorized by the app cluster too.
    AppClusterToken,
}

impl Via {
    /// Whether the app cluster decides what this caller may do.
    pub fn is_app_cluster_user(self) -> bool {
        matches!(self, Via::FrontProxy | Via::AppClusterToken)
    }
}

/// What one authenticator makes of a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Accepted(User),
    /// A credential of the kind this authenticator reads, refused.
    Refused(Refusal),
    /// No credential of the kind this authenticator reads.
    NotMine,
}

/// One way of authenticating a request for `consumer`.
pub trait Authenticator: Send + Sync {
    /// What this authenticator makes of the caller, from what the request
    /// shows and what bindery holds in memory.
    fn authenticate(
        &self,
        consumer: &ConsumerId,
        peer: Option<&PeerCertificate>,
        headers: &http::HeaderMap,
    ) -> Outcome;

    /// The consumers whose callers `peer` can be, when the request does not
    /// say which consumer it is for; none by default.
    fn consumers_of(&self, _peer: &PeerCertificate) -> Vec<ConsumerId> {
        Vec::new()
    }

    /// A slower second try, asking someone else (the app cluster), made
    /// only when no authenticator accepted the caller at once; by default
    /// it has nothing to ask.
    fn authenticate_remotely<'a>(
        &'a self,
        _consumer: &'a ConsumerId,
        _headers: &'a http::HeaderMap,
    ) -> futures::future::BoxFuture<'a, Outcome> {
        Box::pin(async { Outcome::NotMine })
    }
}

/// Why a caller that no authenticator claimed is refused: what it showed.
pub fn unclaimed(peer: Option<&PeerCertificate>, headers: &http::HeaderMap) -> Refusal {
    if peer.is_some() {
        Refusal::UnknownCa
    } else if bearer_token(headers).is_some() {
        Refusal::UnknownToken
    } else {
        Refusal::NoCredential
    }
}

/// The bearer token of an `Authorization` header, if any.
pub fn bearer_token(headers: &http::HeaderMap) -> Option<&str> {
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_read_from_authorization() {
        let mut headers = http::HeaderMap::new();
        assert_eq!(bearer_token(&headers), None);
        headers.insert("authorization", "Bearer abc.def.ghi".parse().unwrap());
        assert_eq!(bearer_token(&headers), Some("abc.def.ghi"));
        headers.insert("authorization", "bearer  xyz".parse().unwrap());
        assert_eq!(bearer_token(&headers), Some("xyz"));
        headers.insert("authorization", "Basic dXNlcjpwYXNz".parse().unwrap());
        assert_eq!(bearer_token(&headers), None);
        headers.insert("authorization", "Bearer ".parse().unwrap());
        assert_eq!(bearer_token(&headers), None);
    }
}
