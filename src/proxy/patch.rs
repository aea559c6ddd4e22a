//! JSON and merge patches, applied by bindery: to the consumer's form of
//! the object as it is, with kube-apiserver's patch semantics
//! (`wire::patch`), so that what the provider is asked to store is the
//! result itself, in provider terms, identity stamped. Whatever a patch
//! does to the labels (nulls them, removes them, replaces the metadata),
//! the object it results in carries exactly its writer's identity.

use crate::status::ApiError;
use crate::translate::BoundResource;
use crate::translate::objects::object_up;
use crate::wire::body::PatchType;
use crate::wire::patch::{self, MAX_OPERATIONS, PatchError};
use serde_json::Value;

/// The consumer's form of `current` (the provider's object, or its Scale)
/// with the patch applied.
pub fn patched(
    bound: &BoundResource,
    patch_type: PatchType,
    patch: &Value,
    current: &Value,
    with_labels: bool,
) -> Result<Value, ApiError> {
    let mut document = current.clone();
    object_up(bound, &mut document, with_labels);
    let result = match patch_type {
        PatchType::Json => {
            let operations = patch.as_array().map_or(0, Vec::len);
            if operations > MAX_OPERATIONS {
                return Err(ApiError::too_large(format!(
                    "Request entity too large: The allowed maximum operations in a JSON patch is {MAX_OPERATIONS}, got {operations}"
                )));
            }
            patch::apply_json_patch(&document, patch)
        }
        PatchType::Merge => patch::apply_merge_patch(&document, patch),
        // An apply is sent as it is, stamped; a strategic merge patch is
        // never read for a custom resource.
        PatchType::Apply | PatchType::StrategicMerge => {
            return Err(ApiError::internal("a patch bindery does not apply"));
        }
    };
    let mut result = result.map_err(|error| failed(patch_type, &error))?;
    keep_managed_fields(&document, current, &mut result);
    Ok(result)
}

/// kube-apiserver's answer when a patch does not apply: a merge patch that
/// is no object is a 400; any JSON patch failure a 422 whose message says
/// nothing of why.
fn failed(patch_type: PatchType, error: &PatchError) -> ApiError {
    match (patch_type, error) {
        (PatchType::Merge, PatchError::InvalidMergePatch) => {
            ApiError::bad_request("Invalid JSON Patch")
        }
        _ => ApiError::generic_invalid(
            "the server rejected our request due to an error in our request",
        ),
    }
}

/// The provider's managed fields, where the patch left the consumer's form
/// of them alone: sending the consumer's form back would erase the entries
/// bindery's labels have (kube-apiserver takes managed fields an update
/// sets as the new truth).
fn keep_managed_fields(before: &Value, current: &Value, result: &mut Value) {
    let pointer = "/metadata/managedFields";
    if before.pointer(pointer) == result.pointer(pointer)
        && let (Some(provider), Some(metadata)) = (
            current.pointer(pointer),
            result.get_mut("metadata").and_then(Value::as_object_mut),
        )
    {
        metadata.insert("managedFields".into(), provider.clone());
    }
}
