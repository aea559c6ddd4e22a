//! Consumer-owned claimed objects as a provider controller sees them in the
//! virtual workspace: only what an accepted claim covers, on every get,
//! list and watch. On a watch, an object that stops being covered leaves
//! with a DELETED event, and one that starts being covered arrives with
//! ADDED, as if the claim's selector were a label selector the server
//! evaluated. Pure.

use super::claim_filter::{ClaimedObject, covers};
use super::claim_references::Pick;
use crate::api::{ClaimOwner, PermissionClaim};
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};

/// The accepted claims on one resource of one consumer's app cluster, each
/// with what its references picked.
#[derive(Clone, Debug)]
pub struct ClaimedView {
    claims: Vec<(PermissionClaim, Vec<Pick>)>,
}

impl ClaimedView {
    pub fn new(claims: Vec<(PermissionClaim, Vec<Pick>)>) -> Self {
        Self { claims }
    }

    /// Whether some claim covers `object` (an app cluster object).
    pub fn covers(&self, object: &Value) -> bool {
        let metadata = &object["metadata"];
        let labels: BTreeMap<String, String> = metadata["labels"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
            .collect();
        let claimed = ClaimedObject {
            name: metadata["name"].as_str().unwrap_or_default(),
            consumer_namespace: metadata["namespace"].as_str(),
            labels: &labels,
            side: ClaimOwner::Consumer,
        };
        self.claims
            .iter()
            .any(|(claim, picked)| covers(claim, &claimed, picked))
    }
}

/// The claims as the forwarding pipeline's view: an app-cluster object is
/// shown as it is when a claim covers it, and not at all otherwise.
impl crate::forward::answer::View for ClaimedView {
    fn object_up(&self, object: &mut Value) -> crate::forward::answer::Visibility {
        if self.covers(object) {
            crate::forward::answer::Visibility::Visible
        } else {
            crate::forward::answer::Visibility::Hidden
        }
    }

    /// Claimed resources are served without subresources.
    fn scale_up(&self, _scale: &mut Value) -> crate::forward::answer::Visibility {
        crate::forward::answer::Visibility::Hidden
    }

    /// The app cluster's words are its consumer's own.
    fn text_up(&self, text: &str) -> String {
        text.to_string()
    }

    fn continue_up(&self, token: &str) -> String {
        token.to_string()
    }
}

/// Objects the claims are checked against apart: a watch's events (by
/// [`ClaimedWatch`], which turns covering changes into events) and a dry
/// run's object (whose uncovered result is forbidden, not hidden). Claimed
/// resources have no subresources, so no Scale is shown.
pub struct CheckedApart;

impl crate::forward::answer::View for CheckedApart {
    fn object_up(&self, _object: &mut Value) -> crate::forward::answer::Visibility {
        crate::forward::answer::Visibility::Visible
    }

    fn scale_up(&self, _scale: &mut Value) -> crate::forward::answer::Visibility {
        crate::forward::answer::Visibility::Hidden
    }

    fn text_up(&self, text: &str) -> String {
        text.to_string()
    }

    fn continue_up(&self, token: &str) -> String {
        token.to_string()
    }
}

/// One watch stream's filter: remembers which objects the watcher has been
/// shown, so that covering changes become ADDED and DELETED events.
#[derive(Debug)]
pub struct ClaimedWatch {
    view: ClaimedView,
    shown: HashSet<String>,
}

impl ClaimedWatch {
    pub fn new(view: ClaimedView) -> Self {
        Self {
            view,
            shown: HashSet::new(),
        }
    }

    /// Remembers the covered items of `list` as shown: the state a watcher
    /// resuming from that list's resourceVersion already has.
    pub fn seen_in(&mut self, list: &Value) {
        for item in list["items"].as_array().into_iter().flatten() {
            if self.view.covers(item) {
                self.shown.insert(key_of(item));
            }
        }
    }

    /// Rewrites one event; `None` drops it.
    pub fn event(&mut self, event: &mut Value) -> Option<()> {
        let kind = event.get("type")?.as_str()?.to_string();
        if kind == "BOOKMARK" || kind == "ERROR" {
            return Some(());
        }
        let object = event.get("object")?;
        let key = key_of(object);
        let covered = kind != "DELETED" && self.view.covers(object);
        let was_shown = self.shown.contains(&key);
        let out = match (covered, was_shown) {
            (true, true) => kind,
            (true, false) => "ADDED".to_string(),
            (false, true) => "DELETED".to_string(),
            (false, false) => return None,
        };
        if covered {
            self.shown.insert(key);
        } else {
            self.shown.remove(&key);
        }
        event["type"] = Value::String(out);
        Some(())
    }
}

fn key_of(object: &Value) -> String {
    format!(
        "{}/{}",
        object["metadata"]["namespace"].as_str().unwrap_or_default(),
        object["metadata"]["name"].as_str().unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn view() -> ClaimedView {
        let claim = serde_json::from_value(json!({"resource": "configmaps", "selector": {
            "owner": "Consumer",
            "labelSelector": {"matchLabels": {"share": "yes"}}}}))
        .unwrap();
        ClaimedView::new(vec![(claim, Vec::new())])
    }

    fn config_map(name: &str, share: Option<&str>) -> Value {
        let mut object =
            json!({"kind": "ConfigMap", "metadata": {"name": name, "namespace": "team"}});
        if let Some(share) = share {
            object["metadata"]["labels"] = json!({"share": share});
        }
        object
    }

    #[test]
    fn lists_keep_only_covered_objects() {
        assert!(view().covers(&config_map("a", Some("yes"))));
        assert!(!view().covers(&config_map("c", None)));
        assert!(!view().covers(&config_map("b", Some("no"))));
    }

    #[test]
    fn an_object_leaving_and_entering_the_claim_is_deleted_and_added() {
        let mut watch = ClaimedWatch::new(view());
        let mut event = |kind: &str, object: Value| {
            let mut e = json!({"type": kind, "object": object});
            watch
                .event(&mut e)
                .map(|()| e["type"].as_str().unwrap().to_string())
        };
        assert_eq!(event("ADDED", config_map("a", None)), None, "never shown");
        assert_eq!(
            event("MODIFIED", config_map("a", Some("yes"))).as_deref(),
            Some("ADDED")
        );
        assert_eq!(
            event("MODIFIED", config_map("a", Some("yes"))).as_deref(),
            Some("MODIFIED")
        );
        assert_eq!(
            event("MODIFIED", config_map("a", Some("no"))).as_deref(),
            Some("DELETED")
        );
        assert_eq!(event("MODIFIED", config_map("a", Some("no"))), None);
        assert_eq!(
            event("DELETED", config_map("a", Some("no"))),
            None,
            "already gone"
        );
        assert_eq!(
            event("ADDED", config_map("b", Some("yes"))).as_deref(),
            Some("ADDED")
        );
        assert_eq!(
            event("DELETED", config_map("b", Some("yes"))).as_deref(),
            Some("DELETED")
        );
        assert_eq!(
            event("BOOKMARK", json!({"metadata": {"resourceVersion": "9"}})).as_deref(),
            Some("BOOKMARK")
        );
    }

    #[test]
    fn a_watch_resuming_from_a_list_knows_what_the_list_showed() {
        let mut watch = ClaimedWatch::new(view());
        watch.seen_in(&json!({"items": [config_map("a", Some("yes")), config_map("b", None)]}));
        let mut leaving = json!({"type": "MODIFIED", "object": config_map("a", Some("no"))});
        assert_eq!(watch.event(&mut leaving), Some(()));
        assert_eq!(leaving["type"], "DELETED");
        let mut unseen = json!({"type": "MODIFIED", "object": config_map("b", Some("no"))});
        assert_eq!(watch.event(&mut unseen), None);
    }

    #[test]
    fn no_claim_covers_nothing() {
        let empty = ClaimedView::new(Vec::new());
        assert!(!empty.covers(&config_map("a", Some("yes"))));
    }
}
