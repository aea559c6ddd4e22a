//! Bearer tokens of an app cluster's service accounts, verified locally with
//! jsonwebtoken against the issuer and public keys (JWKS) the app cluster
//! registered: signature, issuer, audience (the issuer, kube-apiserver's
//! default `--api-audiences`), expiry and not-before, with the user
//! kube-apiserver makes of such a token. Tokens it does not know (another
//! issuer, a legacy Secret token) are reviewed by the app cluster with a
//! TokenReview instead.

use super::front_proxy::{Caller, Registrations};
use super::{Authenticator, PeerCertificate, User, Via};
use crate::route::ConsumerId;
use futures::future::BoxFuture;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode, decode_header};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::api::{Api, PostParams};
use serde::Deserialize;
use std::collections::BTreeMap;

/// An app cluster's service-account token issuer.
#[derive(Clone, Debug)]
pub struct TokenIssuer {
    pub issuer: String,
    pub keys: JwkSet,
}

/// What local verification found.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Valid(Caller),
    /// This issuer's token, and not valid (expired, bad signature, wrong
    /// audience): refused.
    Invalid(String),
    /// Not a token this issuer signed with a known key: another way of
    /// authenticating may know it.
    NotOurs,
}

/// Signature algorithms service-account tokens use; never a shared secret.
const ALGORITHMS: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
];

#[derive(Deserialize)]
struct Claims {
    iss: String,
    #[serde(default)]
    jti: Option<String>,
    #[serde(rename = "kubernetes.io")]
    kubernetes: Option<KubernetesClaims>,
}

#[derive(Deserialize)]
struct KubernetesClaims {
    namespace: String,
    serviceaccount: Reference,
    #[serde(default)]
    pod: Option<Reference>,
    #[serde(default)]
    node: Option<Reference>,
}

#[derive(Deserialize)]
struct Reference {
    name: String,
    uid: String,
}

#[derive(Deserialize)]
struct IssuerOnly {
    iss: String,
}

/// Verifies `token` as one of `issuer`'s.
pub fn verify(token: &str, issuer: &TokenIssuer) -> Verdict {
    let Ok(header) = decode_header(token) else {
        return Verdict::NotOurs;
    };
    // The issuer claim, unverified, only to tell whose token this is.
    let Ok(unverified) = jsonwebtoken::dangerous::insecure_decode::<IssuerOnly>(token) else {
        return Verdict::NotOurs;
    };
    if unverified.claims.iss != issuer.issuer {
        return Verdict::NotOurs;
    }
    let jwk = match header.kid.as_deref() {
        Some(kid) => issuer.keys.find(kid),
        None if issuer.keys.keys.len() == 1 => issuer.keys.keys.first(),
        None => None,
    };
    let Some(jwk) = jwk else {
        return Verdict::NotOurs;
    };
    if !ALGORITHMS.contains(&header.alg) {
        return Verdict::Invalid(format!("algorithm {:?} is not accepted", header.alg));
    }
    let key = match DecodingKey::from_jwk(jwk) {
        Ok(key) => key,
        Err(error) => return Verdict::Invalid(format!("unusable key: {error}")),
    };
    let mut validation = Validation::new(header.alg);
    validation.set_issuer(&[&issuer.issuer]);
    validation.set_audience(&[&issuer.issuer]);
    validation.validate_nbf = true;
    let claims = match decode::<Claims>(token, &key, &validation) {
        Ok(data) => data.claims,
        Err(error) => return Verdict::Invalid(error.to_string()),
    };
    let Some(kubernetes) = claims.kubernetes else {
        return Verdict::Invalid("not a service account token".into());
    };
    debug_assert_eq!(claims.iss, issuer.issuer);
    let namespace = kubernetes.namespace;
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    if let Some(jti) = claims.jti {
        extra.insert(
            "authentication.kubernetes.io/credential-id".into(),
            vec![format!("JTI={jti}")],
        );
    }
    if let Some(pod) = kubernetes.pod {
        extra.insert(
            "authentication.kubernetes.io/pod-name".into(),
            vec![pod.name],
        );
        extra.insert("authentication.kubernetes.io/pod-uid".into(), vec![pod.uid]);
    }
    if let Some(node) = kubernetes.node {
        extra.insert(
            "authentication.kubernetes.io/node-name".into(),
            vec![node.name],
        );
        extra.insert(
            "authentication.kubernetes.io/node-uid".into(),
            vec![node.uid],
        );
    }
    Verdict::Valid(Caller {
        name: format!(
            "system:serviceaccount:{namespace}:{}",
            kubernetes.serviceaccount.name
        ),
        uid: Some(kubernetes.serviceaccount.uid),
        groups: vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{namespace}"),
            "system:authenticated".into(),
        ],
        extra,
    })
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

/// The authenticator of the app clusters' service-account bearer tokens.
pub struct ServiceAccountTokens {
    pub registrations: Registrations,
}

impl Authenticator for ServiceAccountTokens {
    fn authenticate(
        &self,
        consumer: &ConsumerId,
        _peer: Option<&PeerCertificate>,
        headers: &http::HeaderMap,
    ) -> Option<User> {
        let token = bearer_token(headers)?;
        let registration = self.registrations.get(consumer.as_str())?;
        let issuer = registration.token_issuer.as_ref()?;
        match verify(token, issuer) {
            Verdict::Valid(caller) => Some(User {
                name: caller.name,
                uid: caller.uid,
                groups: caller.groups,
                extra: caller.extra,
                consumer: consumer.clone(),
                via: Via::AppClusterToken,
            }),
            Verdict::Invalid(reason) => {
                tracing::debug!(%reason, "service account token refused");
                None
            }
            Verdict::NotOurs => None,
        }
    }

    /// A bearer token this issuer did not sign with a known key (another
    /// issuer, a legacy Secret token, a rotated key): the app cluster is
    /// asked with a TokenReview, as kube-apiserver's webhook authenticator
    /// would.
    fn authenticate_remotely<'a>(
        &'a self,
        consumer: &'a ConsumerId,
        headers: &'a http::HeaderMap,
    ) -> BoxFuture<'a, Option<User>> {
        Box::pin(async move {
            let token = bearer_token(headers)?;
            let registration = self.registrations.get(consumer.as_str())?;
            if let Some(issuer) = &registration.token_issuer
                && verify(token, issuer) != Verdict::NotOurs
            {
                // Ours and refused: no second opinion.
                return None;
            }
            let review = TokenReview {
                spec: TokenReviewSpec {
                    token: Some(token.to_string()),
                    ..Default::default()
                },
                ..Default::default()
            };
            let answer = Api::<TokenReview>::all(registration.app.clone())
                .create(&PostParams::default(), &review)
                .await;
            let status = match answer {
                Ok(answer) => answer.status?,
                Err(error) => {
                    tracing::warn!(%error, "TokenReview against the app cluster failed");
                    return None;
                }
            };
            if status.authenticated != Some(true) {
                return None;
            }
            let user = status.user?;
            Some(User {
                name: user.username?,
                uid: user.uid.filter(|u| !u.is_empty()),
                groups: user.groups.unwrap_or_default(),
                extra: user.extra.unwrap_or_default(),
                consumer: consumer.clone(),
                via: Via::AppClusterToken,
            })
        })
    }
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

    #[test]
    fn garbage_and_other_issuers_are_not_ours() {
        let issuer = TokenIssuer {
            issuer: "https://app.example".into(),
            keys: JwkSet { keys: vec![] },
        };
        assert_eq!(verify("not-a-jwt", &issuer), Verdict::NotOurs);
        // A well-formed token of another issuer (HS256, unsigned-ish).
        let other = jsonwebtoken::encode(
            &jsonwebtoken::Header::default(),
            &serde_json::json!({"iss": "https://elsewhere", "exp": 4102444800u64}),
            &jsonwebtoken::EncodingKey::from_secret(b"k"),
        )
        .unwrap();
        assert_eq!(verify(&other, &issuer), Verdict::NotOurs);
        // Our issuer, but a key we do not have.
        let unknown_key = jsonwebtoken::encode(
            &jsonwebtoken::Header::default(),
            &serde_json::json!({"iss": "https://app.example", "exp": 4102444800u64}),
            &jsonwebtoken::EncodingKey::from_secret(b"k"),
        )
        .unwrap();
        assert_eq!(verify(&unknown_key, &issuer), Verdict::NotOurs);
    }
}
