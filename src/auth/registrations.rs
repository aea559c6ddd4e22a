//! The app clusters registered with the provider, by consumer: how to
//! recognise each one's front proxy, its service-account token issuer, and
//! a client to ask it for token reviews and authorization. Filled from the
//! `app-cluster` Secrets by `crate::app_cluster`; read by the
//! authenticators and the authorization layer.

use super::PeerCertificate;
use super::trust::CaVerifier;
use crate::route::ConsumerId;
use jsonwebtoken::jwk::JwkSet;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// An app cluster's service-account token issuer.
#[derive(Clone, Debug)]
pub struct TokenIssuer {
    pub issuer: String,
    pub keys: JwkSet,
}

/// What an app cluster registered with the provider: how to recognise its
/// front proxy, and a client to ask it for authorization.
pub struct Registration {
    pub requestheader_ca: CaVerifier,
    /// Common names the front proxy's certificate may have; empty: any.
    pub allowed_names: Vec<String>,
    pub app: kube::Client,
    /// The app cluster's service-account token issuer, when registered.
    pub token_issuer: Option<TokenIssuer>,
}

impl Registration {
    /// Whether `peer` chains to this app cluster's requestheader CA.
    pub fn is_of_front_proxy_ca(&self, peer: &PeerCertificate) -> bool {
        self.requestheader_ca.verifies(&peer.der)
    }

    /// Whether `name` may be the front proxy's common name.
    pub fn allows_name(&self, name: &str) -> bool {
        self.allowed_names.is_empty() || self.allowed_names.iter().any(|n| n == name)
    }

    /// Whether `peer` is this app cluster's front proxy: its certificate
    /// chains to the requestheader CA and has an allowed name.
    pub fn is_front_proxy(&self, peer: &PeerCertificate) -> bool {
        self.is_of_front_proxy_ca(peer) && self.allows_name(&peer.common_name)
    }
}

/// The registered app clusters, by consumer; filled by a watch.
#[derive(Clone, Default)]
pub struct Registrations {
    by_consumer: Arc<RwLock<HashMap<String, Arc<Registration>>>>,
}

impl Registrations {
    pub fn get(&self, consumer: &str) -> Option<Arc<Registration>> {
        self.read().get(consumer).cloned()
    }

    pub fn replace(&self, all: HashMap<String, Arc<Registration>>) {
        *self.by_consumer.write().unwrap_or_else(|e| e.into_inner()) = all;
    }

    /// The consumers whose registered front proxy `peer` is.
    pub fn consumers_of(&self, peer: &PeerCertificate) -> Vec<ConsumerId> {
        let mut found: Vec<ConsumerId> = self
            .read()
            .iter()
            .filter(|(_, registration)| registration.is_front_proxy(peer))
            .filter_map(|(consumer, _)| ConsumerId::parse(consumer))
            .collect();
        found.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        found
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Arc<Registration>>> {
        self.by_consumer.read().unwrap_or_else(|e| e.into_inner())
    }
}
