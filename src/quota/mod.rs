//! Quota admission for creates of bound objects. A request that reaches
//! bindery through an app cluster's aggregator passes none of that app
//! cluster's admission, so its ResourceQuotas are read and charged here, as
//! kube-apiserver's quota admission does for a local CRD: one more
//! `count/<resource>.<group>` per create, checked against `status.hard`,
//! written to `status.used` with the quota's resourceVersion (a conflict is
//! read again and retried), not written for a dry run.

pub mod caps;
pub mod charge;
pub mod lifecycle;

use crate::auth::registrations::Registrations;
use crate::status::ApiError;
use charge::{QuotaRefusal, charge, constrains, name_of};
use k8s_openapi::api::core::v1::ResourceQuota;
use kube::api::{Api, ListParams, PostParams};

/// How many times the quotas are read again after a write of theirs failed
/// (kube-apiserver's quota admission retries three times).
const RETRIES: usize = 3;

/// The app clusters whose quotas creates are charged to.
pub struct QuotaAdmission {
    registrations: Registrations,
    lifecycle: lifecycle::NamespaceLifecycle,
}

/// What a create is charged to once the provider accepted it as a dry run.
pub struct Pending {
    api: Api<ResourceQuota>,
    quotas: Vec<ResourceQuota>,
    counted: String,
}

/// The object a refusal names, as kube-apiserver's admission errors do.
pub struct Subject<'a> {
    pub group: &'a str,
    pub resource: &'a str,
    /// The object's name, its `generateName`, else `Unknown`.
    pub name: &'a str,
}

impl QuotaAdmission {
    pub fn new(registrations: Registrations) -> Self {
        Self {
            lifecycle: lifecycle::NamespaceLifecycle::new(registrations.clone()),
            registrations,
        }
    }

    /// Whether `consumer`'s app cluster lets `subject` be created in its
    /// namespace `namespace` (NamespaceLifecycle, [`lifecycle`]).
    pub async fn namespace_admits(
        &self,
        consumer: &str,
        namespace: &str,
        subject: &Subject<'_>,
    ) -> Result<(), ApiError> {
        self.lifecycle
            .admit(
                consumer,
                namespace,
                (subject.group, subject.resource, subject.name),
            )
            .await
    }

    /// The quotas of `consumer`'s app cluster that constrain creating a
    /// `resource.group` object in its namespace `namespace`: `None` when
    /// none does or no app cluster is registered for it.
    pub async fn pending(
        &self,
        consumer: &str,
        namespace: &str,
        group: &str,
        resource: &str,
    ) -> Result<Option<Pending>, ApiError> {
        let Some(registration) = self.registrations.get(consumer) else {
            return Ok(None);
        };
        let api = Api::namespaced(registration.app.clone(), namespace);
        let quotas = list(&api).await?;
        let counted = format!("count/{resource}.{group}");
        if !quotas.iter().any(|q| constrains(q, &counted)) {
            return Ok(None);
        }
        Ok(Some(Pending {
            api,
            quotas,
            counted,
        }))
    }
}

impl Pending {
    /// Charges one create of `subject` (only checks it for a `dry_run`),
    /// or refuses it with kube-apiserver's 403.
    pub async fn charge(self, subject: &Subject<'_>, dry_run: bool) -> Result<(), ApiError> {
        let Pending {
            api,
            mut quotas,
            counted,
        } = self;
        let mut failure = None;
        for _ in 0..=RETRIES {
            let charged =
                charge(&quotas, &counted).map_err(|refusal| refused(subject, &refusal))?;
            if dry_run || charged.is_empty() {
                return Ok(());
            }
            let mut failed = Vec::new();
            for quota in &charged {
                let name = name_of(quota);
                if let Err(error) = api
                    .replace_status(name, &PostParams::default(), quota)
                    .await
                {
                    failed.push(name.to_string());
                    failure = Some(error);
                }
            }
            if failed.is_empty() {
                return Ok(());
            }
            // Only the quotas whose write failed are checked again, as
            // kube-apiserver does; one deleted meanwhile is skipped.
            quotas = list(&api).await?;
            quotas.retain(|q| failed.iter().any(|name| name == name_of(q)));
        }
        Err(match failure {
            Some(kube::Error::Api(status)) if status.code == 409 => ApiError::conflict(
                "",
                "resourcequotas",
                status.details.map(|d| d.name).unwrap_or_default().as_str(),
            ),
            Some(error) => ApiError::internal(format!(
                "updating the app cluster's resource quota: {error}"
            )),
            None => ApiError::internal("the app cluster's resource quotas could not be charged"),
        })
    }
}

async fn list(api: &Api<ResourceQuota>) -> Result<Vec<ResourceQuota>, ApiError> {
    api.list(&ListParams::default())
        .await
        .map(|list| list.items)
        .map_err(|e| match e {
            // An app cluster bound by an older bindery: its account's role
            // lacks the rule until `bindery bind` writes it again.
            kube::Error::Api(status) if status.code == 403 => ApiError::internal(
                "bindery's account in the app cluster may not list resourcequotas, which quota admission reads; run `bindery bind` again to update its role",
            ),
            e => ApiError::internal(format!("reading the app cluster's resource quotas: {e}")),
        })
}

/// The error a refusal is answered with, naming `subject`.
pub fn refused(subject: &Subject<'_>, refusal: &QuotaRefusal) -> ApiError {
    match refusal {
        QuotaRefusal::Unreadable { .. } => ApiError::internal(refusal.message()),
        _ => ApiError::forbidden(
            subject.group,
            subject.resource,
            Some(subject.name),
            &refusal.message(),
        ),
    }
}
