//! The binding API's messages, as `bindery bind` and bindery's `/bind`
//! endpoints exchange them (JSON). Types only.

use crate::api::claims::PermissionClaim;
use serde::{Deserialize, Serialize};

/// A template the caller may bind, as the page and the CLI show it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Offer {
    pub name: String,
    pub description: String,
    pub resources: Vec<OfferedResource>,
    pub claims: Vec<PermissionClaim>,
}

/// One resource of an offer; `versions` are the CRD's served versions
/// (empty when its CRD is missing, which binding will report).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OfferedResource {
    pub group: String,
    pub resource: String,
    pub versions: Vec<String>,
    pub scope: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Offers {
    pub offers: Vec<Offer>,
}

/// What the provider must know of an app cluster to serve its users (the
/// keys of the `app-cluster` Secret, see `crate::app_cluster`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Registration {
    /// Reaches the app cluster as bindery's least-privilege account.
    pub kubeconfig: String,
    pub requestheader_client_ca: String,
    pub requestheader_allowed_names: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_issuer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_jwks: Option<String>,
}

/// `POST /bind/bindings`: bind `template` for the app cluster `identity`
/// (its kube-system namespace UID).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BindRequest {
    /// The template to bind; empty when `export` names an export that exists.
    #[serde(default)]
    pub template: String,
    pub identity: String,
    /// An export of this app cluster that exists already (one `bindery
    /// migrate` took over from kube-bind): the app cluster is registered for
    /// it, and nothing is requested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub export: Option<String>,
    /// Absent when the app-cluster side is only printed (`-o yaml`); a later
    /// bind records it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registration: Option<Registration>,
    /// A browser session whose page shows this bind's progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

/// Where a bind stands, and what the app cluster needs to use it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BindingState {
    pub consumer: String,
    pub cluster_namespace: String,
    pub export: String,
    /// The request's phase: Pending, Succeeded or Failed.
    pub phase: String,
    pub message: String,
    /// The bound group/versions, preferred first within a group.
    pub group_versions: Vec<GroupVersion>,
    /// The export's permission claims, for the APIServiceBinding.
    pub claims: Vec<PermissionClaim>,
    /// PEM of the CA that signed bindery's serving certificate.
    pub serving_ca: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupVersion {
    pub group: String,
    pub version: String,
}

/// `DELETE /bind/bindings/<consumer>/<export>`: the app cluster proves it is
/// the consumer with a kubeconfig that reaches it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnbindRequest {
    pub identity: String,
    pub kubeconfig: String,
}

/// `POST /bind/sessions`: a browser session for the binder.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionCreated {
    pub id: String,
    /// The page's path on bindery.
    pub path: String,
}

/// What a session's page and its CLI see.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionState {
    /// The template the user picked, once picked.
    pub template: Option<String>,
    /// Progress lines, oldest first.
    pub steps: Vec<String>,
    pub done: bool,
    pub error: Option<String>,
}

/// `POST /bind/sessions/<id>/progress` from the CLI.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    pub step: Option<String>,
    #[serde(default)]
    pub done: bool,
    pub error: Option<String>,
}
