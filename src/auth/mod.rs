//! Authentication: who is calling, and for which consumer. Each way of
//! authenticating is an [`Authenticator`]; the tower layer in `server` runs
//! them and refuses everything they do not accept with 401.

pub mod client_cert;

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
    pub groups: Vec<String>,
    /// The consumer this credential speaks for.
    pub consumer: ConsumerId,
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
}
