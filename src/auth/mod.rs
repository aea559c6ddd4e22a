//! Authentication: who is calling, and for which consumer. Each way of
//! authenticating is an [`Authenticator`]; the tower layer in `server` runs
//! them and refuses everything they do not accept with 401.

pub mod client_cert;
pub mod front_proxy;
pub mod service_account;
pub mod trust;

use crate::route::ConsumerId;

/// A verified client certificate presented on the TLS connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerCertificate {
    pub common_name: String,
    pub organizations: Vec<String>,
    /// The DER bytes, for authenticators that verify against other CAs.
    pub der: Vec<u8>,
}

/// An authenticated caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub uid: Option<String>,
    pub groups: Vec<String>,
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
    /// The consumer this credential speaks for.
    pub consumer: ConsumerId,
    /// How the caller was authenticated, which decides how it is authorized.
    pub via: Via,
}

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

/// One way of authenticating a request for `consumer`.
pub trait Authenticator: Send + Sync {
    /// `Some` when this authenticator accepts the caller for `consumer`.
    fn authenticate(
        &self,
        consumer: &ConsumerId,
        peer: Option<&PeerCertificate>,
        headers: &http::HeaderMap,
    ) -> Option<User>;

    /// The consumers whose callers `peer` can be, when the request does not
    /// say which consumer it is for; none by default.
    fn consumers_of(&self, _peer: &PeerCertificate) -> Vec<ConsumerId> {
        Vec::new()
    }

    /// A slower second try, asking someone else (the app cluster), made
    /// only when no authenticator accepted the caller at once; by default
    /// it accepts nobody.
    fn authenticate_remotely<'a>(
        &'a self,
        _consumer: &'a ConsumerId,
        _headers: &'a http::HeaderMap,
    ) -> futures::future::BoxFuture<'a, Option<User>> {
        Box::pin(async { None })
    }
}
