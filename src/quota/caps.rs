//! What one consumer may grow on the provider through one export: how many
//! provider namespaces it may have bindery make, and how many objects of
//! the export's resources it may keep. An export sets them with the
//! annotations `bindery.dev/max-namespaces` and `bindery.dev/max-objects`
//! (carried from its template, as kcp's `core.kcp.io/max-total-objects`
//! caps a workspace), and every export has them: [`Caps::DEFAULT`] where
//! the annotation is absent or unreadable. A create past a cap is refused
//! the way kube-apiserver's quota admission refuses one, naming the export
//! as the quota. Pure.

use super::charge::QuotaRefusal;
use std::collections::BTreeMap;

/// The annotation capping a consumer's provider namespaces.
pub const MAX_NAMESPACES_ANNOTATION: &str = "bindery.dev/max-namespaces";
/// The annotation capping a consumer's objects of the export's resources.
pub const MAX_OBJECTS_ANNOTATION: &str = "bindery.dev/max-objects";

/// The resource names the refusals count.
pub const NAMESPACES_COUNTED: &str = "count/namespaces";
pub const OBJECTS_COUNTED: &str = "bindery.dev/objects";

/// One export's caps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Caps {
    pub namespaces: u64,
    pub objects: u64,
}

impl Caps {
    /// The caps of an export that names none: more than a team uses, less
    /// than what would let one consumer crowd the provider.
    pub const DEFAULT: Caps = Caps {
        namespaces: 1_000,
        objects: 100_000,
    };

    /// The caps `annotations` set, each [`Caps::DEFAULT`]'s where unset or
    /// not a whole number.
    pub fn of(annotations: &BTreeMap<String, String>) -> Self {
        let read = |key: &str, default: u64| {
            annotations
                .get(key)
                .and_then(|value| value.trim().parse().ok())
                .unwrap_or(default)
        };
        Self {
            namespaces: read(MAX_NAMESPACES_ANNOTATION, Self::DEFAULT.namespaces),
            objects: read(MAX_OBJECTS_ANNOTATION, Self::DEFAULT.objects),
        }
    }

    /// Whether one more provider namespace fits beside `used`.
    pub fn one_more_namespace(&self, export: &str, used: u64) -> Result<(), QuotaRefusal> {
        one_more(export, NAMESPACES_COUNTED, used, self.namespaces)
    }

    /// Whether one more object fits beside `used`.
    pub fn one_more_object(&self, export: &str, used: u64) -> Result<(), QuotaRefusal> {
        one_more(export, OBJECTS_COUNTED, used, self.objects)
    }
}

impl Default for Caps {
    fn default() -> Self {
        Self::DEFAULT
    }
}

fn one_more(export: &str, counted: &str, used: u64, limited: u64) -> Result<(), QuotaRefusal> {
    if used < limited {
        return Ok(());
    }
    Err(QuotaRefusal::Exceeded {
        quota: export.to_string(),
        counted: counted.to_string(),
        used: used.to_string(),
        limited: limited.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_come_from_the_annotations_else_the_defaults() {
        let annotations = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>()
        };
        assert_eq!(Caps::of(&annotations(&[])), Caps::DEFAULT);
        assert_eq!(
            Caps::of(&annotations(&[
                (MAX_NAMESPACES_ANNOTATION, "3"),
                (MAX_OBJECTS_ANNOTATION, "many")
            ])),
            Caps {
                namespaces: 3,
                objects: Caps::DEFAULT.objects
            }
        );
    }

    #[test]
    fn past_a_cap_is_refused_as_a_quota_refuses() {
        let caps = Caps {
            namespaces: 2,
            objects: 5,
        };
        assert!(caps.one_more_object("db", 4).is_ok());
        let refusal = caps.one_more_object("db", 5).unwrap_err();
        assert_eq!(
            refusal.message(),
            "exceeded quota: db, requested: bindery.dev/objects=1, used: bindery.dev/objects=5, limited: bindery.dev/objects=5"
        );
        assert!(caps.one_more_namespace("db", 1).is_ok());
        assert!(caps.one_more_namespace("db", 2).is_err());
    }
}
