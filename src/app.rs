//! Everything requests are served from, shared by the layers and the
//! handlers: the catalog, the proxy, the registered app clusters, the one
//! [`Authorizer`], the `/bind` service and the health checks.

use crate::auth::registrations::Registrations;
use crate::authz::Authorizer;
use crate::catalog::watch::SharedCatalog;
use crate::proxy::Proxy;
use std::sync::Arc;
use std::time::Duration;

pub struct App {
    pub catalog: SharedCatalog,
    pub proxy: Proxy,
    /// The registered app clusters, whose users are authorized by them.
    pub registrations: Registrations,
    pub authorizer: Arc<Authorizer>,
    /// The provider's `/version`, answered as bindery's own.
    pub version: serde_json::Value,
    /// The `/bind` endpoints.
    pub bind: crate::bind::server::BindService,
    /// How long a request body may take to arrive ([`crate::request_body`]).
    pub body_timeout: Duration,
    /// What `/livez`, `/readyz` and `/healthz` check.
    pub health: Arc<crate::health::Health>,
    /// `--external-url`, when given: where exports' virtual workspaces are
    /// published (the kcp endpoint slices name it too).
    pub external_url: Option<String>,
}

impl App {
    /// The provider's client.
    pub fn provider(&self) -> &kube::Client {
        &self.bind.provider
    }
}
