//! What kube-bind's konnector left on bindery's binding in the app cluster:
//! its judgement of the binding's Secret (`SecretValid` False, and the
//! `Ready` it summarised from it), taken back at each bind, so that the
//! binding's Ready is bindery's again once the konnector is gone. A
//! konnector still running judges it again, once.

use crate::api::APIServiceBinding;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

/// Takes back the konnector's judgement of the binding named `binding`;
/// whether there was one. Refused when the binding changed under it three
/// times.
pub async fn take_back_judgement(app: &kube::Client, binding: &str) -> kube::Result<bool> {
    let bindings = Api::<APIServiceBinding>::all(app.clone());
    for attempt in 0..3 {
        let Some(found) = bindings.get_opt(binding).await? else {
            return Ok(false);
        };
        let Some(conditions) = found
            .status
            .as_ref()
            .and_then(|status| status.without_konnectors_judgement())
        else {
            return Ok(false);
        };
        // Pinned to what was read: bindery's status controller may write
        // in between, and a merge patch replaces the whole list.
        let patch = json!({
            "metadata": {"resourceVersion": found.metadata.resource_version},
            "status": {"conditions": conditions},
        });
        match bindings
            .patch_status(binding, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Ok(_) => return Ok(true),
            Err(kube::Error::Api(status)) if status.code == 409 && attempt < 2 => continue,
            Err(error) => return Err(error),
        }
    }
    unreachable!("the last attempt returns")
}
