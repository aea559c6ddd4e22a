//! bindery's own reach to Secrets and ConfigMaps in the provider, namespace
//! by namespace: with `--namespace-data-role`, a RoleBinding of that
//! ClusterRole (the chart's `<release>:namespace-data`) to bindery itself
//! in each namespace it serves, and in no other, so that its provider role
//! holds no Secrets cluster-wide. Which namespaces those are is decided
//! here ([`serves`]):
//! the cluster and provider namespaces bindery makes (marked at creation)
//! and the ones kube-bind's backend made (marked by their annotations); the
//! chart's admission policy holds bindery to the same marks.

use crate::api::keys::{
    API_SERVICE_NAMESPACE_ANNOTATION, CLUSTER_NAMESPACE_LABEL, IDENTITY_ANNOTATION,
    LEGACY_IDENTITY_ANNOTATION,
};
use crate::translate::identity::CONSUMER_LABEL;
use futures::StreamExt;
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::authorization::v1::SelfSubjectAccessReview;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Duration;

/// The name of bindery's own RoleBinding in each namespace it serves.
pub const BINDING_NAME: &str = "bindery:namespace-data";

/// The field manager of that RoleBinding.
const FIELD_MANAGER: &str = "bindery-namespace-access";

/// How long a new RoleBinding may take to be in force.
const IN_FORCE_WITHIN: Duration = Duration::from_secs(5);

/// Labels bindery sets on the namespaces it makes, and annotations kube-bind's
/// backend sets on its own: a namespace carrying one is served. The chart's
/// ValidatingAdmissionPolicy (`namespace-data`) lets bindery add none of
/// them to a namespace that exists (`deploy/chart`), so bindery cannot make
/// a namespace it was not given look like one.
pub const MARK_LABELS: [&str; 2] = [CLUSTER_NAMESPACE_LABEL, CONSUMER_LABEL];
pub const MARK_ANNOTATIONS: [&str; 3] = [
    IDENTITY_ANNOTATION,
    LEGACY_IDENTITY_ANNOTATION,
    API_SERVICE_NAMESPACE_ANNOTATION,
];

/// Whether bindery serves `namespace`, so holds its Secrets and ConfigMaps.
/// Pure.
pub fn serves(namespace: &Namespace) -> bool {
    let labels = namespace.metadata.labels.as_ref();
    let annotations = namespace.metadata.annotations.as_ref();
    MARK_LABELS
        .iter()
        .any(|mark| labels.is_some_and(|l| l.contains_key(*mark)))
        || MARK_ANNOTATIONS
            .iter()
            .any(|mark| annotations.is_some_and(|a| a.contains_key(*mark)))
}

/// The RBAC subject for a provider user name: a ServiceAccount for
/// `system:serviceaccount:<namespace>:<name>`, else a User. Pure.
pub fn subject(username: &str) -> Value {
    match username
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'))
    {
        Some((namespace, name)) => json!({"kind": "ServiceAccount", "name": name,
            "namespace": namespace}),
        None => json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io",
            "name": username}),
    }
}

/// bindery's own RoleBinding of `role` to `subject`. Pure.
pub fn binding(role: &str, subject: &Value) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": BINDING_NAME},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
            "name": role},
        "subjects": [subject],
    })
}

/// The ClusterRole bindery binds to itself, and itself.
#[derive(Clone, Debug)]
pub struct NamespaceAccess {
    role: String,
    subject: Value,
}

impl NamespaceAccess {
    /// bindery's own access through `role`, as whom the provider knows
    /// `client` (a SelfSubjectReview, which every user may make).
    pub async fn discover(client: &kube::Client, role: String) -> kube::Result<Self> {
        let review: SelfSubjectReview = serde_json::from_value(json!({
            "apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview",
            "metadata": {},
        }))
        .map_err(kube::Error::SerdeError)?;
        let answered = Api::<SelfSubjectReview>::all(client.clone())
            .create(&PostParams::default(), &review)
            .await?;
        let username = answered
            .status
            .and_then(|s| s.user_info)
            .and_then(|u| u.username)
            .unwrap_or_default();
        Ok(Self {
            role,
            subject: subject(&username),
        })
    }

    /// [`discover`](Self::discover) when `--namespace-data-role` names a
    /// role; `None` when it does not.
    pub async fn of_flag(
        client: &kube::Client,
        role: Option<String>,
    ) -> anyhow::Result<Option<Self>> {
        use anyhow::Context as _;
        let Some(role) = role else {
            return Ok(None);
        };
        let access = Self::discover(client, role)
            .await
            .context("asking the provider who bindery is (a SelfSubjectReview)")?;
        Ok(Some(access))
    }

    /// Binds the role to bindery in `namespace`. Idempotent.
    pub async fn grant(&self, client: &kube::Client, namespace: &str) -> kube::Result<()> {
        Api::<RoleBinding>::namespaced(client.clone(), namespace)
            .patch(
                BINDING_NAME,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(binding(&self.role, &self.subject)),
            )
            .await?;
        Ok(())
    }

    /// [`grant`](Self::grant), then waits (up to 5 s) until the provider
    /// lets bindery write Secrets in `namespace`: for a namespace just made,
    /// whose Secrets bindery writes next. A grant not in force by then is a
    /// 403 naming the namespace, so that the caller tries again later
    /// rather than writing into a refusal.
    pub async fn grant_in_force(&self, client: &kube::Client, namespace: &str) -> kube::Result<()> {
        self.grant(client, namespace).await?;
        let review: SelfSubjectAccessReview = serde_json::from_value(json!({
            "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"namespace": namespace, "verb": "create",
                "resource": "secrets"}},
        }))
        .map_err(kube::Error::SerdeError)?;
        let reviews = Api::<SelfSubjectAccessReview>::all(client.clone());
        let deadline = tokio::time::Instant::now() + IN_FORCE_WITHIN;
        loop {
            let answer = reviews.create(&PostParams::default(), &review).await?;
            if answer.status.is_some_and(|s| s.allowed) {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(kube::Error::Api(
                    kube::core::Status::failure(
                        &format!(
                            "bindery's access to the Secrets of namespace {namespace} \
                             (RoleBinding {BINDING_NAME}) is not in force within {} s",
                            IN_FORCE_WITHIN.as_secs()
                        ),
                        "Forbidden",
                    )
                    .with_code(403)
                    .boxed(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Keeps bindery's RoleBinding in exactly the namespaces it [`serves`]:
/// made in those made by an earlier bindery and kube-bind's as they
/// appear, made again when deleted, and taken away from a namespace that
/// loses its marks. Its own RoleBindings are followed too (one watch, by
/// name), so that a namespace that has one costs the provider nothing when
/// the namespaces are listed again (a new leader, a watch resumed): only a
/// missing one is made. Runs until dropped.
pub async fn follow(client: kube::Client, access: NamespaceAccess) {
    let (bound, writer) = reflector::store::<RoleBinding>();
    let own = watcher::Config::default().fields(&format!("metadata.name={BINDING_NAME}"));
    let mut bindings = watcher(Api::<RoleBinding>::all(client.clone()), own)
        .default_backoff()
        .reflect(writer)
        .boxed();
    let mut namespaces = watcher(Api::<Namespace>::all(client.clone()), Default::default())
        .default_backoff()
        .boxed();
    let mut served = Served::default();
    let mut known = false;
    loop {
        tokio::select! {
            Some(event) = bindings.next() => match event {
                Ok(watcher::Event::InitDone) => {
                    known = true;
                    // Listed again: any deleted while unwatched is made.
                    for namespace in &served.now {
                        access.hold(&client, &bound, namespace).await;
                    }
                }
                Ok(watcher::Event::Delete(binding)) => {
                    let namespace = binding.metadata.namespace.unwrap_or_default();
                    if served.now.contains(&namespace) {
                        access.hold(&client, &bound, &namespace).await;
                    }
                }
                Ok(_) => {}
                Err(error) => tracing::warn!(%error, "watching bindery's own RoleBindings failed"),
            },
            Some(event) = namespaces.next(), if known => match event {
                Ok(event) => match served.apply(event) {
                    Some((name, Reach::Hold)) => access.hold(&client, &bound, &name).await,
                    Some((name, Reach::Drop)) => access.release(&client, &bound, &name).await,
                    Some((_, Reach::Leave)) | None => {}
                },
                Err(error) => {
                    tracing::warn!(%error, "watching namespaces for bindery's own access failed")
                }
            },
            else => return,
        }
    }
}

/// What bindery's RoleBinding in one namespace should become.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// There: the namespace is served.
    Hold,
    /// Gone: the namespace is not (or no longer) marked.
    Drop,
    /// As it is: the namespace is going, and takes it along.
    Leave,
}

/// What bindery's RoleBinding in `namespace` should become. Pure.
pub fn reach(namespace: &Namespace) -> Reach {
    if namespace.metadata.deletion_timestamp.is_some() {
        Reach::Leave
    } else if serves(namespace) {
        Reach::Hold
    } else {
        Reach::Drop
    }
}

/// The namespaces bindery serves now, as the namespace watch tells them;
/// a (re)list replaces them when it ends. Pure.
#[derive(Debug, Default)]
struct Served {
    now: BTreeSet<String>,
    listing: Option<BTreeSet<String>>,
}

impl Served {
    /// Takes in one event of the namespace watch, and says what the
    /// namespace it names, if any, should have.
    fn apply(&mut self, event: watcher::Event<Namespace>) -> Option<(String, Reach)> {
        let (namespace, listing) = match event {
            watcher::Event::Init => {
                self.listing = Some(BTreeSet::new());
                return None;
            }
            watcher::Event::InitDone => {
                if let Some(listed) = self.listing.take() {
                    self.now = listed;
                }
                return None;
            }
            watcher::Event::Delete(namespace) => {
                self.now
                    .remove(&namespace.metadata.name.unwrap_or_default());
                return None;
            }
            watcher::Event::InitApply(namespace) => (namespace, true),
            watcher::Event::Apply(namespace) => (namespace, false),
        };
        let reach = reach(&namespace);
        let name = namespace.metadata.name.unwrap_or_default();
        let served = if listing {
            self.listing.get_or_insert_default()
        } else {
            &mut self.now
        };
        if reach == Reach::Hold {
            served.insert(name.clone());
        } else {
            served.remove(&name);
        }
        Some((name, reach))
    }
}

impl NamespaceAccess {
    /// Whether `bound` (bindery's RoleBindings) has bindery's binding of
    /// its role in `namespace`.
    fn held(&self, bound: &Store<RoleBinding>, namespace: &str) -> bool {
        bound
            .get(&ObjectRef::new(BINDING_NAME).within(namespace))
            .is_some_and(|binding| binding.role_ref.name == self.role)
    }

    /// Binds the role to bindery in `namespace` unless `bound` has it there.
    async fn hold(&self, client: &kube::Client, bound: &Store<RoleBinding>, namespace: &str) {
        if self.held(bound, namespace) {
            return;
        }
        if let Err(error) = self.grant(client, namespace).await {
            tracing::warn!(%error, namespace, "binding bindery's own access failed");
        }
    }

    /// Deletes bindery's binding of the role in `namespace`, when `bound`
    /// has it there.
    async fn release(&self, client: &kube::Client, bound: &Store<RoleBinding>, namespace: &str) {
        if !self.held(bound, namespace) {
            return;
        }
        let bindings = Api::<RoleBinding>::namespaced(client.clone(), namespace);
        match bindings
            .delete(BINDING_NAME, &DeleteParams::default())
            .await
        {
            Ok(_) => tracing::info!(
                namespace,
                "bindery's own access taken from a namespace no longer marked"
            ),
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => {
                tracing::warn!(%error, namespace, "taking bindery's own access away failed")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn namespace(labels: &[(&str, &str)], annotations: &[(&str, &str)]) -> Namespace {
        let map = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let mut namespace = Namespace::default();
        namespace.metadata.labels = Some(map(labels));
        namespace.metadata.annotations = Some(map(annotations));
        namespace
    }

    #[test]
    fn served_namespaces_are_the_marked_ones() {
        assert!(serves(&namespace(
            &[(CLUSTER_NAMESPACE_LABEL, "true")],
            &[]
        )));
        assert!(serves(&namespace(&[(CONSUMER_LABEL, "c1")], &[])));
        assert!(serves(&namespace(&[], &[(IDENTITY_ANNOTATION, "x")])));
        assert!(
            serves(&namespace(&[], &[(LEGACY_IDENTITY_ANNOTATION, "x")])),
            "a cluster namespace of an early kube-bind backend"
        );
        assert!(serves(&namespace(
            &[],
            &[(API_SERVICE_NAMESPACE_ANNOTATION, "kube-bind-x/default")]
        )));
        assert!(!serves(&namespace(&[("team", "a")], &[("note", "b")])));
        assert!(!serves(&Namespace::default()));
    }

    fn named(name: &str, labels: &[(&str, &str)]) -> Namespace {
        let mut made = namespace(labels, &[]);
        made.metadata.name = Some(name.into());
        made
    }

    #[test]
    fn a_namespace_keeps_bindery_s_access_while_marked_and_loses_it_unmarked() {
        let marked = named("a", &[(CONSUMER_LABEL, "c1")]);
        assert_eq!(reach(&marked), Reach::Hold);
        assert_eq!(reach(&named("a", &[])), Reach::Drop);
        let mut going = marked.clone();
        going.metadata.deletion_timestamp =
            serde_json::from_value(json!("2026-11-30T00:00:00Z")).ok();
        assert!(going.metadata.deletion_timestamp.is_some());
        assert_eq!(reach(&going), Reach::Leave, "the namespace takes it along");
    }

    #[test]
    fn the_served_namespaces_follow_the_watch_and_a_relist_replaces_them() {
        let mut served = Served::default();
        assert_eq!(
            served.apply(watcher::Event::Apply(named("a", &[(CONSUMER_LABEL, "c1")]))),
            Some(("a".to_string(), Reach::Hold))
        );
        served.apply(watcher::Event::Apply(named("b", &[(CONSUMER_LABEL, "c2")])));
        assert_eq!(served.now, BTreeSet::from(["a".into(), "b".into()]));
        assert_eq!(
            served.apply(watcher::Event::Apply(named("a", &[]))),
            Some(("a".to_string(), Reach::Drop)),
            "its mark removed"
        );
        assert_eq!(served.now, BTreeSet::from(["b".into()]));
        served.apply(watcher::Event::Delete(named(
            "b",
            &[(CONSUMER_LABEL, "c2")],
        )));
        assert!(served.now.is_empty());

        // Listed again: what was served before counts until the list ends.
        served.apply(watcher::Event::Apply(named(
            "old",
            &[(CONSUMER_LABEL, "c3")],
        )));
        served.apply(watcher::Event::Init);
        assert_eq!(
            served.apply(watcher::Event::InitApply(named(
                "c",
                &[(CONSUMER_LABEL, "c4")]
            ))),
            Some(("c".to_string(), Reach::Hold))
        );
        assert_eq!(
            served.apply(watcher::Event::InitApply(named("d", &[]))),
            Some(("d".to_string(), Reach::Drop))
        );
        assert_eq!(served.now, BTreeSet::from(["old".into()]));
        served.apply(watcher::Event::InitDone);
        assert_eq!(
            served.now,
            BTreeSet::from(["c".into()]),
            "gone while unwatched: old"
        );
    }

    #[test]
    fn a_service_account_is_bound_as_one_and_anyone_else_as_a_user() {
        assert_eq!(
            subject("system:serviceaccount:bindery-system:bindery"),
            json!({"kind": "ServiceAccount", "name": "bindery", "namespace": "bindery-system"})
        );
        assert_eq!(subject("admin")["kind"], "User", "a user is bound by name");
        assert_eq!(subject("system:serviceaccount:broken")["kind"], "User");
    }

    #[test]
    fn the_binding_names_the_role_and_only_bindery() {
        let bound = binding("bindery:namespace-data", &subject("admin"));
        assert_eq!(bound["roleRef"]["name"], "bindery:namespace-data");
        assert_eq!(bound["subjects"].as_array().map(Vec::len), Some(1));
        assert_eq!(bound["metadata"]["name"], BINDING_NAME);
    }
}
