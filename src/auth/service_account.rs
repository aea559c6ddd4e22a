//! Bearer tokens of an app cluster's service accounts, verified locally with
//! jsonwebtoken against the issuer and public keys (JWKS) the app cluster
//! registered: signature, issuer, audience (the issuer, kube-apiserver's
//! default `--api-audiences`), expiry and not-before, with the user
//! kube-apiserver makes of such a token. Tokens it does not know (another
//! issuer, a legacy Secret token) are reviewed by the app cluster with a
//! TokenReview instead, its answers remembered briefly
//! ([`super::token_review`]). A refusal says why ([`Refusal`]).

use super::registrations::{Registrations, TokenIssuer};
use super::token_review::TokenReviews;
use super::{
    Authenticator, Outcome, PeerCertificate, Refusal, RequestUser, User, Via, bearer_token,
};
use crate::route::ConsumerId;
use futures::future::BoxFuture;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode, decode_header};
use serde::Deserialize;
use std::collections::BTreeMap;

/// What local verification found.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Valid(RequestUser),
    /// This issuer's token, and not valid (expired, bad signature, wrong
    /// audience): refused.
    Invalid(Refusal),
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
        return Verdict::Invalid(Refusal::InvalidToken(format!(
            "algorithm {:?} is not accepted",
            header.alg
        )));
    }
    let key = match DecodingKey::from_jwk(jwk) {
        Ok(key) => key,
        Err(error) => {
            return Verdict::Invalid(Refusal::InvalidToken(format!("unusable key: {error}")));
        }
    };
    let mut validation = Validation::new(header.alg);
    validation.set_issuer(&[&issuer.issuer]);
    validation.set_audience(&[&issuer.issuer]);
    validation.validate_nbf = true;
    let claims = match decode::<Claims>(token, &key, &validation) {
        Ok(data) => data.claims,
        Err(error) => return Verdict::Invalid(refusal_of(&error)),
    };
    let Some(kubernetes) = claims.kubernetes else {
        return Verdict::Invalid(Refusal::InvalidToken("not a service account token".into()));
    };
    debug_assert_eq!(claims.iss, issuer.issuer);
    Verdict::Valid(user_of(kubernetes, claims.jti))
}

/// The user a verified service account token names, with the extras
/// kube-apiserver gives it (its credential id, pod and node). Pure.
fn user_of(kubernetes: KubernetesClaims, jti: Option<String>) -> RequestUser {
    let namespace = kubernetes.namespace;
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    if let Some(jti) = jti {
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
    RequestUser {
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
    }
}

/// Why jsonwebtoken refused a token of the registered issuer.
fn refusal_of(error: &jsonwebtoken::errors::Error) -> Refusal {
    match error.kind() {
        ErrorKind::ExpiredSignature => Refusal::ExpiredToken,
        ErrorKind::ImmatureSignature => Refusal::TokenNotYetValid,
        ErrorKind::InvalidAudience => Refusal::WrongAudience,
        ErrorKind::InvalidIssuer => Refusal::WrongIssuer,
        ErrorKind::InvalidSignature => Refusal::BadSignature,
        _ => Refusal::InvalidToken(error.to_string()),
    }
}

/// The authenticator of the app clusters' service-account bearer tokens.
pub struct ServiceAccountTokens {
    pub registrations: Registrations,
    /// The app clusters' answers to TokenReviews, remembered.
    pub reviews: TokenReviews,
}

impl Authenticator for ServiceAccountTokens {
    fn authenticate(
        &self,
        consumer: &ConsumerId,
        _peer: Option<&PeerCertificate>,
        headers: &http::HeaderMap,
    ) -> Outcome {
        let Some(token) = bearer_token(headers) else {
            return Outcome::NotMine;
        };
        let Some(registration) = self.registrations.get(consumer.as_str()) else {
            return Outcome::Refused(Refusal::NotRegistered);
        };
        let Some(issuer) = registration.token_issuer.as_ref() else {
            return Outcome::NotMine;
        };
        match verify(token, issuer) {
            Verdict::Valid(identity) => {
                Outcome::Accepted(User::new(identity, consumer, Via::AppClusterToken))
            }
            Verdict::Invalid(refusal) => Outcome::Refused(refusal),
            Verdict::NotOurs => Outcome::NotMine,
        }
    }

    /// A bearer token this issuer did not sign with a known key (another
    /// issuer, a legacy Secret token, a rotated key): the app cluster is
    /// asked with a TokenReview, as kube-apiserver's webhook authenticator
    /// would, and its answer remembered briefly.
    fn authenticate_remotely<'a>(
        &'a self,
        consumer: &'a ConsumerId,
        headers: &'a http::HeaderMap,
    ) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            let Some(token) = bearer_token(headers) else {
                return Outcome::NotMine;
            };
            let Some(registration) = self.registrations.get(consumer.as_str()) else {
                return Outcome::NotMine; // Refused at once, above.
            };
            if let Some(issuer) = &registration.token_issuer
                && verify(token, issuer) != Verdict::NotOurs
            {
                // Ours and refused above: no second opinion.
                return Outcome::NotMine;
            }
            match self
                .reviews
                .review(&registration.app, consumer.as_str(), token)
                .await
            {
                Ok(identity) => {
                    Outcome::Accepted(User::new(identity, consumer, Via::AppClusterToken))
                }
                Err(refusal) => Outcome::Refused(refusal),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::jwk::{Jwk, JwkSet};
    use jsonwebtoken::{EncodingKey, Header};
    use serde_json::json;

    const ISSUER: &str = "https://app.example";

    /// An issuer with one ES256 key (a test cluster's service-account key),
    /// and a signer of claims with it.
    fn issuer_and_signer() -> (TokenIssuer, impl Fn(&serde_json::Value) -> String) {
        let dir = std::env::temp_dir().join(format!("bindery-sa-{}", std::process::id()));
        let pki = crate::certs::ensure_cluster(&dir, "app").unwrap();
        let pem = std::fs::read(pki.service_account().0).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let key = EncodingKey::from_ec_pem(&pem).unwrap();
        let mut jwk = Jwk::from_encoding_key(&key, Algorithm::ES256).unwrap();
        jwk.common.key_id = Some("k1".into());
        let issuer = TokenIssuer {
            issuer: ISSUER.into(),
            keys: JwkSet { keys: vec![jwk] },
        };
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some("k1".into());
        let sign =
            move |claims: &serde_json::Value| jsonwebtoken::encode(&header, claims, &key).unwrap();
        (issuer, sign)
    }

    fn claims() -> serde_json::Value {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        json!({"iss": ISSUER, "aud": [ISSUER], "exp": now + 600, "nbf": now - 10,
            "iat": now - 10, "sub": "system:serviceaccount:team:reader",
            "kubernetes.io": {"namespace": "team",
                "serviceaccount": {"name": "reader", "uid": "u-1"}}})
    }

    #[test]
    fn each_refusal_of_a_token_of_the_registered_issuer_says_why() {
        let (issuer, sign) = issuer_and_signer();
        let Verdict::Valid(user) = verify(&sign(&claims()), &issuer) else {
            panic!("a good token is valid");
        };
        assert_eq!(user.name, "system:serviceaccount:team:reader");
        let with = |change: &dyn Fn(&mut serde_json::Value)| {
            let mut claims = claims();
            change(&mut claims);
            verify(&sign(&claims), &issuer)
        };
        assert_eq!(
            with(&|c| c["exp"] = json!(1_700_000_000u64)),
            Verdict::Invalid(Refusal::ExpiredToken)
        );
        assert_eq!(
            with(&|c| c["nbf"] = json!(4_102_444_800u64)),
            Verdict::Invalid(Refusal::TokenNotYetValid)
        );
        assert_eq!(
            with(&|c| c["aud"] = json!(["https://elsewhere"])),
            Verdict::Invalid(Refusal::WrongAudience)
        );
        assert!(matches!(
            with(&|c| {
                c.as_object_mut().unwrap().remove("kubernetes.io");
            }),
            Verdict::Invalid(Refusal::InvalidToken(_))
        ));
        let mut forged = sign(&claims());
        forged.truncate(forged.len() - 4);
        forged.push_str("AAAA");
        assert_eq!(
            verify(&forged, &issuer),
            Verdict::Invalid(Refusal::BadSignature)
        );
        assert_eq!(
            with(&|c| c["iss"] = json!("https://elsewhere")),
            Verdict::NotOurs,
            "another issuer's token goes to a TokenReview"
        );
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
