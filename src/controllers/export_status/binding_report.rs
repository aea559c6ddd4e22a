//! What an app cluster's APIServiceBinding says, from the provider's side:
//! its Ready is the export's, and, when `bindery bind` registered its
//! APIServices, its SchemaInSync says whether the app cluster's aggregator
//! serves them (which the export reads back as ConsumerInSync). Pure.

use super::flow::{READY, SCHEMA_IN_SYNC};
use crate::api::Condition;
use crate::api::service_binding::judged_by_a_konnector;
use crate::controllers::conditions::{condition, find, set_condition};

/// One APIService of the binding, as the app cluster reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiServiceSeen {
    pub name: String,
    pub available: bool,
    pub message: String,
}

/// The binding's conditions: `current` with Ready taken from the export's
/// `export` conditions (unless kube-bind's konnector has made Ready its
/// own: `api::service_binding::judged_by_a_konnector`, since two writers
/// of one condition would rewrite it after each other without end) and,
/// when there are `api_services`, SchemaInSync from their
/// availability. Other conditions are kept.
pub fn binding_conditions(
    current: &[Condition],
    export: &[Condition],
    api_services: &[ApiServiceSeen],
    generation: Option<i64>,
) -> Vec<Condition> {
    let mut conditions = current.to_vec();
    if let Some(ready) = find(export, READY).filter(|_| !judged_by_a_konnector(current)) {
        let mut mirrored = ready.clone();
        mirrored.observed_generation = generation;
        set_condition(&mut conditions, mirrored);
    }
    if !api_services.is_empty() {
        let unavailable: Vec<String> = api_services
            .iter()
            .filter(|s| !s.available)
            .map(|s| format!("APIService {} is not available: {}", s.name, s.message))
            .collect();
        let in_sync = if unavailable.is_empty() {
            condition(
                SCHEMA_IN_SYNC,
                true,
                "APIServicesAvailable",
                "the app cluster serves every bound version",
                generation,
            )
        } else {
            condition(
                SCHEMA_IN_SYNC,
                false,
                "APIServiceUnavailable",
                &unavailable.join("; "),
                generation,
            )
        };
        set_condition(&mut conditions, in_sync);
    }
    conditions
}

/// Whether two condition lists say the same, times aside.
pub fn same(a: &[Condition], b: &[Condition]) -> bool {
    let key = |c: &Condition| {
        (
            c.type_.clone(),
            c.status.clone(),
            c.reason.clone(),
            c.message.clone(),
            c.observed_generation,
        )
    };
    a.len() == b.len() && a.iter().all(|x| b.iter().any(|y| key(x) == key(y)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::service_binding::SECRET_VALID_CONDITION;

    fn seen(name: &str, available: bool) -> ApiServiceSeen {
        ApiServiceSeen {
            name: name.into(),
            available,
            message: if available {
                ""
            } else {
                "FailedDiscoveryCheck"
            }
            .into(),
        }
    }

    #[test]
    fn ready_is_the_exports_and_schema_in_sync_follows_the_api_services() {
        let export = vec![condition(READY, true, "Ready", "", Some(3))];
        let out = binding_conditions(
            &[],
            &export,
            &[seen("v1.g", true), seen("v2.g", true)],
            Some(1),
        );
        assert_eq!(find(&out, READY).unwrap().status, "True");
        assert_eq!(find(&out, READY).unwrap().observed_generation, Some(1));
        assert_eq!(
            find(&out, SCHEMA_IN_SYNC).unwrap().reason,
            "APIServicesAvailable"
        );

        let out = binding_conditions(
            &out,
            &export,
            &[seen("v1.g", true), seen("v2.g", false)],
            Some(1),
        );
        let in_sync = find(&out, SCHEMA_IN_SYNC).unwrap();
        assert_eq!(in_sync.status, "False");
        assert!(
            in_sync
                .message
                .contains("APIService v2.g is not available: FailedDiscoveryCheck")
        );
    }

    /// On main bindery set Ready back to the export's after each time the
    /// konnector made it its summary, and the two rewrote it without end.
    #[test]
    fn ready_is_left_to_a_konnector_that_judged_the_binding() {
        let export = vec![condition(READY, true, "Ready", "", Some(3))];
        let konnectors = vec![
            condition(
                SECRET_VALID_CONDITION,
                false,
                "KubeconfigSecretInvalid",
                "no namespace",
                None,
            ),
            condition(
                READY,
                false,
                "KubeconfigSecretInvalid",
                "no namespace",
                None,
            ),
        ];
        let out = binding_conditions(&konnectors, &export, &[seen("v1.g", true)], Some(1));
        assert_eq!(
            find(&out, READY),
            find(&konnectors, READY),
            "the konnector's"
        );
        assert_eq!(
            find(&out, SCHEMA_IN_SYNC).unwrap().status,
            "True",
            "still bindery's"
        );
        // Written again, it is the same: nothing to write.
        assert!(same(
            &out,
            &binding_conditions(&out, &export, &[seen("v1.g", true)], Some(1))
        ));
        // A SecretValid the konnector found True takes nothing from bindery.
        let valid = vec![condition(
            crate::api::service_binding::SECRET_VALID_CONDITION,
            true,
            "",
            "",
            None,
        )];
        let out = binding_conditions(&valid, &export, &[], Some(1));
        assert_eq!(find(&out, READY).unwrap().status, "True");
    }

    #[test]
    fn without_api_services_schema_in_sync_is_left_as_it_is() {
        let mine = condition(SCHEMA_IN_SYNC, true, "SetByHand", "", None);
        let out = binding_conditions(std::slice::from_ref(&mine), &[], &[], None);
        assert_eq!(out, vec![mine]);
    }

    #[test]
    fn same_ignores_times_and_order() {
        let a = vec![
            condition("A", true, "r", "", None),
            condition("B", false, "r", "", None),
        ];
        let b = vec![a[1].clone(), a[0].clone()];
        assert!(same(&a, &b));
        assert!(!same(&a, &[a[0].clone()]));
        assert!(!same(
            &a,
            &[a[0].clone(), condition("B", true, "r", "", None)]
        ));
    }
}
