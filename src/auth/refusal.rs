//! Why an authenticator refused a caller. The reason is logged, with the
//! request id, and never sent: every refused caller gets the same 401, as
//! from kube-apiserver, so that a caller learns nothing about which
//! credentials exist. Reasons never hold a credential (no token, no session
//! id).

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No client certificate and no bearer token.
    NoCredential,
    /// A client certificate that no CA trusted on this endpoint issued.
    UnknownCa,
    /// A bearer token no authenticator of this endpoint reads.
    UnknownToken,
    /// An aggregated request whose consumer neither its TLS server name nor
    /// its front-proxy certificate tells.
    UnknownConsumer,
    /// A consumer certificate of bindery's CA, for another consumer.
    CertificateNotForConsumer,
    /// A certificate of the provider's client CA that names no user.
    NoUserName,
    /// A front-proxy certificate of the consumer's registered CA whose
    /// common name is not an allowed one.
    NameNotAllowed,
    /// The front proxy named no user (`X-Remote-User`).
    NoRemoteUser,
    /// The consumer has no registered app cluster to trust tokens of.
    NotRegistered,
    /// A service-account token of the registered issuer that has expired.
    ExpiredToken,
    /// A token that is not valid yet (`nbf`).
    TokenNotYetValid,
    /// A token for another audience.
    WrongAudience,
    /// A token of another issuer.
    WrongIssuer,
    /// A token whose signature does not verify with the registered key.
    BadSignature,
    /// A token of the registered issuer that is wrong otherwise.
    InvalidToken(String),
    /// The TokenReview answered that the token does not authenticate, with
    /// the reviewer's error if it gave one.
    ReviewRefused(Option<String>),
    /// The TokenReview could not be made.
    ReviewFailed(String),
    /// A bind session id that names no live session.
    UnknownSession,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NoCredential => f.write_str("no client certificate and no bearer token"),
            Refusal::UnknownCa => {
                f.write_str("the client certificate is of no CA trusted on this endpoint")
            }
            Refusal::UnknownToken => f.write_str("no authenticator here reads the bearer token"),
            Refusal::UnknownConsumer => f.write_str("the request's consumer cannot be told"),
            Refusal::CertificateNotForConsumer => {
                f.write_str("the consumer certificate is not for this consumer")
            }
            Refusal::NoUserName => f.write_str("the client certificate names no user"),
            Refusal::NameNotAllowed => {
                f.write_str("the front-proxy certificate's common name is not an allowed name")
            }
            Refusal::NoRemoteUser => f.write_str("the front proxy named no user"),
            Refusal::NotRegistered => f.write_str("the consumer has no registered app cluster"),
            Refusal::ExpiredToken => f.write_str("the token has expired"),
            Refusal::TokenNotYetValid => f.write_str("the token is not valid yet"),
            Refusal::WrongAudience => f.write_str("the token is for another audience"),
            Refusal::WrongIssuer => f.write_str("the token is of another issuer"),
            Refusal::BadSignature => f.write_str("the token's signature does not verify"),
            Refusal::InvalidToken(why) => write!(f, "the token is invalid: {why}"),
            Refusal::ReviewRefused(None) => f.write_str("the TokenReview refused the token"),
            Refusal::ReviewRefused(Some(why)) => {
                write!(f, "the TokenReview refused the token: {why}")
            }
            Refusal::ReviewFailed(why) => write!(f, "the TokenReview failed: {why}"),
            Refusal::UnknownSession => f.write_str("no live bind session has that id"),
        }
    }
}

impl std::error::Error for Refusal {}
