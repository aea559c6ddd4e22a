//! Conditions on the objects the controllers report on: built and merged the
//! way Kubernetes tools expect (one per type; the transition time moves only
//! when the status does). Pure.

use crate::api::Condition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// A condition of `type_`, stamped now.
pub fn condition(
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
    generation: Option<i64>,
) -> Condition {
    Condition {
        type_: type_.to_string(),
        status: if status { "True" } else { "False" }.to_string(),
        reason: reason.to_string(),
        message: message.to_string(),
        observed_generation: generation,
        last_transition_time: Some(Time(now())),
        severity: None,
    }
}

/// Puts `new` into `conditions`, replacing the one of the same type; the
/// transition time is kept when the status did not change.
pub fn set_condition(conditions: &mut Vec<Condition>, mut new: Condition) {
    if let Some(old) = conditions.iter_mut().find(|c| c.type_ == new.type_) {
        // One read without a time (kube-bind's CRD allows it) gets one.
        if old.status == new.status && old.last_transition_time.is_some() {
            new.last_transition_time = old.last_transition_time.clone();
        }
        *old = new;
    } else {
        conditions.push(new);
    }
}

/// The condition of `type_`, if any.
pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

fn now() -> k8s_openapi::jiff::Timestamp {
    // Whole seconds, as Kubernetes serializes them.
    let now = k8s_openapi::jiff::Timestamp::now();
    k8s_openapi::jiff::Timestamp::from_second(now.as_second()).unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_time_moves_only_with_the_status() {
        let mut conditions = Vec::new();
        let mut first = condition("Ready", true, "Fine", "", None);
        first.last_transition_time = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        set_condition(&mut conditions, first);
        set_condition(
            &mut conditions,
            condition("Ready", true, "StillFine", "", Some(2)),
        );
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].reason, "StillFine");
        assert_eq!(
            conditions[0].last_transition_time.as_ref().unwrap().0,
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH
        );
        set_condition(
            &mut conditions,
            condition("Ready", false, "Broken", "why", None),
        );
        assert_ne!(
            conditions[0].last_transition_time.as_ref().unwrap().0,
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH
        );
        assert_eq!(find(&conditions, "Ready").unwrap().status, "False");
        assert!(find(&conditions, "Other").is_none());
    }
}
