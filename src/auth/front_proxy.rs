//! The app clusters' front proxies (their aggregation layers) calling on
//! behalf of their users. A request is accepted for consumer X only when its
//! client certificate chains to the requestheader CA registered for X's app
//! cluster and its common name is one of X's allowed names; only then are
//! `X-Remote-User`, `X-Remote-Uid`, `X-Remote-Group` and
//! `X-Remote-Extra-*` read, the way kube-apiserver's requestheader
//! authenticator reads them. From anyone else they mean nothing.

use super::registrations::Registrations;
use super::{Authenticator, Outcome, PeerCertificate, Refusal, RequestUser, User, Via};
use crate::route::ConsumerId;
use std::collections::BTreeMap;

const USER_HEADER: &str = "x-remote-user";
const UID_HEADER: &str = "x-remote-uid";
const GROUP_HEADER: &str = "x-remote-group";
const EXTRA_PREFIX: &str = "x-remote-extra-";

/// The authenticator of front-proxy requests.
pub struct FrontProxy {
    pub registrations: Registrations,
}

impl Authenticator for FrontProxy {
    fn authenticate(
        &self,
        consumer: &ConsumerId,
        peer: Option<&PeerCertificate>,
        headers: &http::HeaderMap,
    ) -> Outcome {
        let Some(peer) = peer else {
            return Outcome::NotMine;
        };
        let Some(registration) = self.registrations.get(consumer.as_str()) else {
            return Outcome::NotMine;
        };
        if !registration.is_of_front_proxy_ca(peer) {
            return Outcome::NotMine;
        }
        if !registration.allows_name(&peer.common_name) {
            return Outcome::Refused(Refusal::NameNotAllowed);
        }
        match from_headers(headers) {
            Some(identity) => Outcome::Accepted(User::new(identity, consumer, Via::FrontProxy)),
            None => Outcome::Refused(Refusal::NoRemoteUser),
        }
    }

    fn consumers_of(&self, peer: &PeerCertificate) -> Vec<ConsumerId> {
        self.registrations.consumers_of(peer)
    }
}

/// Reads the user the front proxy names in the requestheader headers;
/// `None` without a user name. Pure.
pub fn from_headers(headers: &http::HeaderMap) -> Option<RequestUser> {
    let text = |value: &http::HeaderValue| value.to_str().ok().map(str::to_string);
    let name = headers
        .get_all(USER_HEADER)
        .iter()
        .filter_map(text)
        .find(|v| !v.is_empty())?;
    let uid = headers
        .get_all(UID_HEADER)
        .iter()
        .filter_map(text)
        .find(|v| !v.is_empty());
    let groups = headers
        .get_all(GROUP_HEADER)
        .iter()
        .filter_map(text)
        .collect();
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (header, value) in headers {
        // Header names arrive lowercased.
        let Some(key) = header.as_str().strip_prefix(EXTRA_PREFIX) else {
            continue;
        };
        if let Some(value) = text(value) {
            extra.entry(unescape(key)).or_default().push(value);
        }
    }
    Some(RequestUser {
        name,
        uid,
        groups,
        extra,
    })
}

/// Extra keys are percent-encoded in header names (they may hold `/`);
/// a key that does not decode is kept as it came.
fn unescape(key: &str) -> String {
    crate::percent::decode(key).unwrap_or_else(|| key.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever the front proxy's headers hold (any bytes a header
        /// value may carry, any extra key), they are read without a panic:
        /// a user only with a non-empty name, every extra key decoded or
        /// kept as it came.
        #[test]
        fn any_requestheader_headers_are_read(
            users in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..16), 0..3),
            groups in prop::collection::vec("[ -~]{0,16}", 0..4),
            extras in prop::collection::vec(("[a-z0-9%._-]{1,16}", prop::collection::vec(any::<u8>(), 0..16)), 0..4),
        ) {
            let mut headers = http::HeaderMap::new();
            for user in &users {
                if let Ok(value) = http::HeaderValue::from_bytes(user) {
                    headers.append(USER_HEADER, value);
                }
            }
            for group in &groups {
                if let Ok(value) = http::HeaderValue::from_str(group) {
                    headers.append(GROUP_HEADER, value);
                }
            }
            for (key, value) in &extras {
                let name = format!("{EXTRA_PREFIX}{key}");
                if let (Ok(name), Ok(value)) = (
                    http::header::HeaderName::from_bytes(name.as_bytes()),
                    http::HeaderValue::from_bytes(value),
                ) {
                    headers.append(name, value);
                }
            }
            if let Some(user) = from_headers(&headers) {
                prop_assert!(!user.name.is_empty());
            }
        }
    }

    fn headers(pairs: &[(&str, &str)]) -> http::HeaderMap {
        let mut map = http::HeaderMap::new();
        for (k, v) in pairs {
            map.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        map
    }

    #[test]
    fn reads_user_uid_groups_and_extras_as_kube_apiserver_does() {
        let caller = from_headers(&headers(&[
            ("X-Remote-User", "alice"),
            ("X-Remote-Uid", "u-1"),
            ("X-Remote-Group", "devs"),
            ("X-Remote-Group", "system:authenticated"),
            ("X-Remote-Extra-Scopes", "read"),
            ("X-Remote-Extra-Scopes", "write"),
            ("X-Remote-Extra-Example.com%2fteam", "db"),
        ]))
        .unwrap();
        assert_eq!(caller.name, "alice");
        assert_eq!(caller.uid.as_deref(), Some("u-1"));
        assert_eq!(caller.groups, ["devs", "system:authenticated"]);
        assert_eq!(caller.extra["scopes"], ["read", "write"]);
        assert_eq!(caller.extra["example.com/team"], ["db"]);
    }

    #[test]
    fn no_user_no_caller() {
        assert!(from_headers(&headers(&[("X-Remote-Group", "system:masters")])).is_none());
        assert!(from_headers(&headers(&[("X-Remote-User", "")])).is_none());
    }

    #[test]
    fn undecodable_extra_keys_are_kept() {
        assert_eq!(unescape("a%2Fb"), "a/b");
        assert_eq!(unescape("bad%zz"), "bad%zz");
        assert_eq!(unescape("trailing%2"), "trailing%2");
    }

    #[test]
    fn only_the_registered_front_proxy_of_the_consumer_is_believed() {
        use super::super::registrations::Registration;
        use super::super::trust::CaVerifier;
        use rustls_pki_types::pem::PemObject;
        use std::collections::HashMap;
        use std::sync::Arc;
        let dir = std::env::temp_dir().join(format!("bindery-fp-{}", std::process::id()));
        // Two CAs standing in for two app clusters' front-proxy CAs.
        let ours = crate::certs::ensure_bindery(&dir.join("ours"), &[], &[]).unwrap();
        let theirs = crate::certs::ensure_bindery(&dir.join("theirs"), &[], &[]).unwrap();
        let leaf = |pki: &crate::certs::BinderyPki, cn: &str| {
            let pem = std::fs::read(crate::certs::ensure_consumer(pki, cn).unwrap()).unwrap();
            let der = rustls_pki_types::CertificateDer::from_pem_slice(&pem).unwrap();
            super::super::client_cert::peer_certificate(&der).unwrap()
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _guard = runtime.enter();
        let config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
        let registrations = Registrations::default();
        registrations.replace(HashMap::from([(
            "c1".to_string(),
            Arc::new(Registration {
                requestheader_ca: CaVerifier::from_pem(&std::fs::read(ours.consumer_ca()).unwrap())
                    .unwrap(),
                allowed_names: vec!["front-proxy-client".into()],
                app: kube::Client::try_from(config).unwrap(),
                token_issuer: None,
            }),
        )]));
        let auth = FrontProxy { registrations };
        let c1 = ConsumerId::parse("c1").unwrap();
        let c2 = ConsumerId::parse("c2").unwrap();
        let asked = headers(&[("X-Remote-User", "alice"), ("X-Remote-Group", "devs")]);
        let Outcome::Accepted(user) =
            auth.authenticate(&c1, Some(&leaf(&ours, "front-proxy-client")), &asked)
        else {
            panic!("the registered front proxy is accepted");
        };
        assert_eq!((user.name.as_str(), user.via), ("alice", Via::FrontProxy));
        assert_eq!(user.groups, ["devs"]);
        assert_eq!(
            auth.authenticate(&c1, Some(&leaf(&theirs, "front-proxy-client")), &asked),
            Outcome::NotMine,
            "another app cluster's CA"
        );
        assert_eq!(
            auth.authenticate(&c1, Some(&leaf(&ours, "someone-else")), &asked),
            Outcome::Refused(Refusal::NameNotAllowed)
        );
        assert_eq!(
            auth.authenticate(
                &c1,
                Some(&leaf(&ours, "front-proxy-client")),
                &headers(&[("X-Remote-Group", "system:masters")])
            ),
            Outcome::Refused(Refusal::NoRemoteUser)
        );
        assert_eq!(
            auth.authenticate(&c2, Some(&leaf(&ours, "front-proxy-client")), &asked),
            Outcome::NotMine,
            "a consumer without that registration"
        );
        assert_eq!(auth.authenticate(&c1, None, &asked), Outcome::NotMine);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
