//! Export identities: each export has a Secret holding 32 random bytes, and
//! the hex sha256 of them in `status.identityHash`. The hash is set once and
//! never changed. When the Secret and the status disagree (or the Secret is
//! gone), the export gets `IdentityValid=False` and is no longer served,
//! rather than mixing objects of two identities.

use super::conditions::{condition, set_condition};
use super::naming;
use crate::api::{APIServiceExport, IDENTITY_VALID_CONDITION};
use crate::translate::IdentityHash;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use ring::rand::{SecureRandom, SystemRandom};
use serde_json::json;
use std::collections::BTreeMap;

/// The key in the identity Secret.
pub const SECRET_KEY: &str = "key";

/// What the identity check found, decided from the Secret's bytes and the
/// recorded hash. Pure.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing recorded and no Secret: make both.
    Unset,
    /// A Secret but no recorded hash: record its hash.
    Record(IdentityHash),
    /// Secret and status agree.
    Valid,
    /// They disagree, or the Secret is gone: stop serving.
    InDoubt(String),
}

pub fn judge(secret_key: Option<&[u8]>, recorded: Option<&str>) -> Verdict {
    match (secret_key, recorded) {
        (None, None) => Verdict::Unset,
        (Some(key), None) => Verdict::Record(IdentityHash::of_secret(key)),
        (None, Some(_)) => Verdict::InDoubt(
            "the identity Secret is gone; the recorded identityHash cannot be proven, so the \
             export is not served. Restore the Secret, or delete and recreate the export"
                .into(),
        ),
        (Some(key), Some(recorded)) => {
            if IdentityHash::of_secret(key).as_str() == recorded {
                Verdict::Valid
            } else {
                Verdict::InDoubt(
                    "the identity Secret does not match status.identityHash; the export is not \
                     served until they agree. Restore the original Secret"
                        .into(),
                )
            }
        }
    }
}

/// Makes sure `export` has an identity, and reports `IdentityValid`.
/// Returns whether the identity is valid.
pub async fn ensure(client: &kube::Client, export: &APIServiceExport) -> kube::Result<bool> {
    let namespace = export.namespace().unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    let secret_name = naming::identity_secret(&export.name_any());
    let secret = secrets.get_opt(&secret_name).await?;
    let key = secret
        .as_ref()
        .and_then(|s| s.data.as_ref())
        .and_then(|d| d.get(SECRET_KEY))
        .map(|b| b.0.clone());
    let recorded = export.status.as_ref().and_then(|s| s.identity_hash.clone());
    let exports: Api<APIServiceExport> = Api::namespaced(client.clone(), &namespace);
    let mut conditions = export
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    let (hash, valid, message) = match judge(key.as_deref(), recorded.as_deref()) {
        Verdict::Unset => {
            let mut bytes = [0u8; 32];
            SystemRandom::new()
                .fill(&mut bytes)
                .map_err(|_| kube::Error::Service("no system randomness".into()))?;
            let secret = identity_secret(export, &secret_name, &bytes);
            secrets.create(&PostParams::default(), &secret).await?;
            (Some(IdentityHash::of_secret(&bytes)), true, String::new())
        }
        Verdict::Record(hash) => (Some(hash), true, String::new()),
        Verdict::Valid => (None, true, String::new()),
        Verdict::InDoubt(message) => (None, false, message),
    };
    let generation = export.metadata.generation;
    set_condition(
        &mut conditions,
        if valid {
            condition(
                IDENTITY_VALID_CONDITION,
                true,
                "IdentityProven",
                "",
                generation,
            )
        } else {
            condition(
                IDENTITY_VALID_CONDITION,
                false,
                "IdentityMismatch",
                &message,
                generation,
            )
        },
    );
    let mut status = json!({"conditions": conditions});
    if let Some(hash) = hash {
        status["identityHash"] = json!(hash.as_str());
    }
    exports
        .patch_status(
            &export.name_any(),
            &PatchParams::default(),
            // Optimistic: conditions are written by more than one controller.
            &Patch::Merge(json!({
                "metadata": {"resourceVersion": export.resource_version()},
                "status": status,
            })),
        )
        .await?;
    Ok(valid)
}

fn identity_secret(export: &APIServiceExport, name: &str, bytes: &[u8]) -> Secret {
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_string()),
            namespace: export.namespace(),
            owner_references: Some(vec![owner(export)]),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            SECRET_KEY.to_string(),
            ByteString(bytes.to_vec()),
        )])),
        type_: Some("Opaque".into()),
        ..Default::default()
    }
}

/// A controller owner reference to `export`.
pub fn owner(export: &APIServiceExport) -> OwnerReference {
    export
        .controller_owner_ref(&())
        .expect("an export read from the API server has a name and uid")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts() {
        let key = [7u8; 32];
        let hash = IdentityHash::of_secret(&key);
        assert_eq!(judge(None, None), Verdict::Unset);
        assert_eq!(judge(Some(&key), None), Verdict::Record(hash.clone()));
        assert_eq!(judge(Some(&key), Some(hash.as_str())), Verdict::Valid);
        assert!(matches!(
            judge(Some(&[8u8; 32]), Some(hash.as_str())),
            Verdict::InDoubt(m) if m.contains("does not match")
        ));
        assert!(matches!(
            judge(None, Some(hash.as_str())),
            Verdict::InDoubt(m) if m.contains("gone")
        ));
    }
}
