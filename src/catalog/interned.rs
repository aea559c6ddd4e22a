//! One shared copy of each distinct BoundSchema spec. Every consumer of an
//! export gets a BoundSchema copied from the same CRD, so a thousand
//! consumers of one resource hold one parsed schema between them, not a
//! thousand.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionSpec;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

/// Specs in use, by their JSON text.
#[derive(Default)]
pub struct Specs {
    known: Mutex<HashMap<String, Weak<CustomResourceDefinitionSpec>>>,
}

/// How many specs are added between sweeps of the ones no longer in use.
const SWEEP_EVERY: usize = 1024;

impl Specs {
    /// The shared spec written as `json`; `None` when it is not a spec.
    pub fn get(&self, json: &serde_json::Value) -> Option<Arc<CustomResourceDefinitionSpec>> {
        let text = json.to_string();
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(spec) = known.get(&text).and_then(Weak::upgrade) {
            return Some(spec);
        }
        let spec = Arc::new(serde_json::from_value(json.clone()).ok()?);
        if known.len() % SWEEP_EVERY == SWEEP_EVERY - 1 {
            known.retain(|_, spec| spec.strong_count() > 0);
        }
        known.insert(text, Arc::downgrade(&spec));
        Some(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(kind: &str) -> serde_json::Value {
        json!({"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": kind},
            "versions": [{"name": "v1", "served": true, "storage": true}]})
    }

    #[test]
    fn equal_specs_are_one_copy_and_different_ones_are_not() {
        let specs = Specs::default();
        let a = specs.get(&spec("Widget")).unwrap();
        let b = specs.get(&spec("Widget")).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        let c = specs.get(&spec("Gadget")).unwrap();
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(c.names.kind, "Gadget");
        assert!(specs.get(&json!({"group": 1})).is_none());
    }

    #[test]
    fn a_spec_no_longer_used_is_parsed_again() {
        let specs = Specs::default();
        drop(specs.get(&spec("Widget")).unwrap());
        let again = specs.get(&spec("Widget")).unwrap();
        assert_eq!(again.names.kind, "Widget");
    }
}
