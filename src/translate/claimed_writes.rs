//! Writes to claimed objects are checked against the claims on the object
//! as it is (and as it will be), and then sent pinned to the
//! resourceVersion that was checked. If the object changes in between,
//! kube-apiserver answers 409 Conflict, instead of the write landing on an
//! object that no claim covers any more. This module pins a request body to
//! a resourceVersion, for each kind of write. Pure.

use serde_json::{Value, json};

/// The JSON patch, merge patch, strategic merge patch and apply patch
/// content types kube-apiserver takes.
const JSON_PATCH: &str = "application/json-patch+json";
const MERGE_PATCH: &str = "application/merge-patch+json";
const STRATEGIC_MERGE_PATCH: &str = "application/strategic-merge-patch+json";
const APPLY_PATCH: &str = "application/apply-patch+yaml";

/// The resourceVersion a write body carries, if any.
pub fn body_resource_version(body: &Value) -> Option<&str> {
    body["metadata"]["resourceVersion"]
        .as_str()
        .filter(|v| !v.is_empty())
}

/// A PUT body pinned to `version` (a version the caller gave stays: it is
/// already a precondition).
pub fn pin_update(mut body: Value, version: &str) -> Value {
    if body_resource_version(&body).is_none()
        && let Some(object) = body.as_object_mut()
    {
        let metadata = object.entry("metadata").or_insert_with(|| json!({}));
        if let Some(metadata) = metadata.as_object_mut() {
            metadata.insert("resourceVersion".into(), version.into());
        }
    }
    body
}

/// A PATCH body of `content_type` pinned to `version`: a resourceVersion in
/// a merge, strategic or apply patch is a precondition; a JSON patch gets a
/// `test` operation first. `Err` says why the body cannot be read.
pub fn pin_patch(content_type: &str, body: &[u8], version: &str) -> Result<Vec<u8>, String> {
    let media = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    match media.as_str() {
        JSON_PATCH => {
            let operations: Vec<Value> =
                serde_json::from_slice(body).map_err(|e| format!("invalid JSON patch: {e}"))?;
            let mut pinned = vec![json!({
                "op": "test", "path": "/metadata/resourceVersion", "value": version,
            })];
            pinned.extend(operations);
            Ok(serde_json::to_vec(&pinned).unwrap_or_default())
        }
        MERGE_PATCH | STRATEGIC_MERGE_PATCH => {
            let patch: Value =
                serde_json::from_slice(body).map_err(|e| format!("invalid patch: {e}"))?;
            object_patch(patch, version)
        }
        APPLY_PATCH => {
            let patch: Value =
                serde_yaml::from_slice(body).map_err(|e| format!("invalid apply patch: {e}"))?;
            object_patch(patch, version)
        }
        other => Err(format!("the patch content type {other:?} is not supported")),
    }
}

fn object_patch(patch: Value, version: &str) -> Result<Vec<u8>, String> {
    if !patch.is_object() {
        return Err("the patch is not a JSON object".into());
    }
    Ok(serde_json::to_vec(&pin_update(patch, version)).unwrap_or_default())
}

/// DeleteOptions (the DELETE body, perhaps empty) with a resourceVersion
/// precondition, unless the caller gave one.
pub fn pin_delete(body: &[u8], version: &str) -> Result<Vec<u8>, String> {
    let mut options: Value = if body.iter().all(u8::is_ascii_whitespace) {
        json!({"kind": "DeleteOptions", "apiVersion": "v1"})
    } else {
        serde_json::from_slice(body).map_err(|e| format!("invalid DeleteOptions: {e}"))?
    };
    let Some(object) = options.as_object_mut() else {
        return Err("DeleteOptions is not a JSON object".into());
    };
    let preconditions = object.entry("preconditions").or_insert_with(|| json!({}));
    if let Some(preconditions) = preconditions.as_object_mut() {
        preconditions
            .entry("resourceVersion")
            .or_insert_with(|| version.into());
    }
    Ok(serde_json::to_vec(&options).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_update_is_pinned_unless_it_carries_its_own_version() {
        let pinned = pin_update(json!({"metadata": {"name": "a"}}), "7");
        assert_eq!(pinned["metadata"]["resourceVersion"], "7");
        let own = pin_update(json!({"metadata": {"resourceVersion": "5"}}), "7");
        assert_eq!(own["metadata"]["resourceVersion"], "5");
        let bare = pin_update(json!({"data": {}}), "7");
        assert_eq!(bare["metadata"]["resourceVersion"], "7");
    }

    #[test]
    fn every_patch_type_is_pinned() {
        for content_type in [
            MERGE_PATCH,
            "application/strategic-merge-patch+json; charset=utf-8",
        ] {
            let pinned = pin_patch(content_type, br#"{"data":{"k":"v"}}"#, "9").unwrap();
            let pinned: Value = serde_json::from_slice(&pinned).unwrap();
            assert_eq!(pinned["metadata"]["resourceVersion"], "9");
            assert_eq!(pinned["data"]["k"], "v");
        }
        let apply = pin_patch(APPLY_PATCH, b"apiVersion: v1\nkind: ConfigMap\n", "9").unwrap();
        let apply: Value = serde_json::from_slice(&apply).unwrap();
        assert_eq!(
            (
                apply["kind"].as_str(),
                apply["metadata"]["resourceVersion"].as_str()
            ),
            (Some("ConfigMap"), Some("9"))
        );
        let json_patch =
            pin_patch(JSON_PATCH, br#"[{"op":"remove","path":"/data/k"}]"#, "9").unwrap();
        let json_patch: Value = serde_json::from_slice(&json_patch).unwrap();
        assert_eq!(json_patch[0]["op"], "test");
        assert_eq!(json_patch[0]["value"], "9");
        assert_eq!(json_patch[1]["op"], "remove");
    }

    #[test]
    fn unreadable_patches_are_refused_not_passed_on() {
        assert!(pin_patch(MERGE_PATCH, b"[1]", "1").is_err());
        assert!(pin_patch(MERGE_PATCH, b"{", "1").is_err());
        assert!(pin_patch(JSON_PATCH, b"{}", "1").is_err());
        assert!(pin_patch("text/plain", b"{}", "1").is_err());
        assert!(pin_patch(APPLY_PATCH, b"- a\n- b\n", "1").is_err());
    }

    #[test]
    fn deletes_are_pinned_with_a_precondition() {
        let empty: Value = serde_json::from_slice(&pin_delete(b"", "3").unwrap()).unwrap();
        assert_eq!(empty["preconditions"]["resourceVersion"], "3");
        assert_eq!(empty["kind"], "DeleteOptions");
        let own: Value = serde_json::from_slice(
            &pin_delete(br#"{"preconditions":{"resourceVersion":"2"}}"#, "3").unwrap(),
        )
        .unwrap();
        assert_eq!(own["preconditions"]["resourceVersion"], "2");
        let propagation: Value = serde_json::from_slice(
            &pin_delete(br#"{"propagationPolicy":"Foreground"}"#, "3").unwrap(),
        )
        .unwrap();
        assert_eq!(propagation["propagationPolicy"], "Foreground");
        assert_eq!(propagation["preconditions"]["resourceVersion"], "3");
        assert!(pin_delete(b"[]", "3").is_err());
    }
}
