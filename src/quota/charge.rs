//! What a create of one bound object costs in a namespace's ResourceQuotas:
//! kube-apiserver's quota admission for a resource with an object-count
//! evaluator (`count/<resource>.<group>`), decided from the quotas as read.
//! Pure: reading and writing the quotas is `super`'s.

use k8s_openapi::api::core::v1::ResourceQuota;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube_quantity::ParsedQuantity;

/// Why a create is refused, worded as kube-apiserver's quota admission.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QuotaRefusal {
    /// The quota limits the resource but its controller has not counted it
    /// yet (`status.used` lacks it).
    StatusUnknown { quota: String, counted: String },
    /// One more object would pass the quota's `status.hard`.
    Exceeded {
        quota: String,
        counted: String,
        used: String,
        limited: String,
    },
    /// A quantity the API server would not have stored.
    Unreadable { quota: String, value: String },
}

impl QuotaRefusal {
    /// The error's message after `<resource> "<name>" is forbidden: `.
    pub fn message(&self) -> String {
        match self {
            Self::StatusUnknown { quota, counted } => {
                format!("status unknown for quota: {quota}, resources: {counted}")
            }
            Self::Exceeded {
                quota,
                counted,
                used,
                limited,
            } => format!(
                "exceeded quota: {quota}, requested: {counted}=1, used: {counted}={used}, limited: {counted}={limited}"
            ),
            Self::Unreadable { quota, value } => {
                format!("quota {quota} holds a quantity that cannot be read: {value:?}")
            }
        }
    }
}

/// The quota's name (empty when it has none).
pub fn name_of(quota: &ResourceQuota) -> &str {
    quota.metadata.name.as_deref().unwrap_or_default()
}

/// Whether `quota` constrains `counted`: it has no scope (no scope matches
/// an object-count evaluator's objects) and its `status.hard` names it.
pub fn constrains(quota: &ResourceQuota, counted: &str) -> bool {
    let spec = quota.spec.as_ref();
    let scoped = spec
        .and_then(|s| s.scopes.as_ref())
        .is_some_and(|s| !s.is_empty())
        || spec
            .and_then(|s| s.scope_selector.as_ref())
            .and_then(|s| s.match_expressions.as_ref())
            .is_some_and(|e| !e.is_empty());
    !scoped && hard(quota, counted).is_some()
}

fn hard<'a>(quota: &'a ResourceQuota, counted: &str) -> Option<&'a Quantity> {
    quota.status.as_ref()?.hard.as_ref()?.get(counted)
}

fn used<'a>(quota: &'a ResourceQuota, counted: &str) -> Option<&'a Quantity> {
    quota.status.as_ref()?.used.as_ref()?.get(counted)
}

fn parsed(quota: &ResourceQuota, value: &Quantity) -> Result<ParsedQuantity, QuotaRefusal> {
    ParsedQuantity::try_from(value).map_err(|_| QuotaRefusal::Unreadable {
        quota: name_of(quota).to_string(),
        value: value.0.clone(),
    })
}

/// The quotas among `quotas` that one more `counted` object changes, each
/// with its `status.used` raised by one; empty when none constrains it.
/// Refused, as kube-apiserver refuses, at the first quota (in the order
/// given) that has not counted the resource or has no room left.
pub fn charge(quotas: &[ResourceQuota], counted: &str) -> Result<Vec<ResourceQuota>, QuotaRefusal> {
    let one = ParsedQuantity::try_from(Quantity("1".into())).expect("1 is a quantity");
    let mut charged = Vec::new();
    for quota in quotas.iter().filter(|q| constrains(q, counted)) {
        let Some(used_now) = used(quota, counted) else {
            return Err(QuotaRefusal::StatusUnknown {
                quota: name_of(quota).to_string(),
                counted: counted.to_string(),
            });
        };
        let limit = hard(quota, counted).expect("a constraining quota has the hard limit");
        let after = parsed(quota, used_now)? + one.clone();
        if after > parsed(quota, limit)? {
            return Err(QuotaRefusal::Exceeded {
                quota: name_of(quota).to_string(),
                counted: counted.to_string(),
                used: used_now.0.clone(),
                limited: limit.0.clone(),
            });
        }
        let mut raised = quota.clone();
        raised
            .status
            .as_mut()
            .and_then(|s| s.used.as_mut())
            .expect("a counted quota has status.used")
            .insert(counted.to_string(), after.into());
        charged.push(raised);
    }
    Ok(charged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const COUNT: &str = "count/widgets.example.com";

    fn quota(value: serde_json::Value) -> ResourceQuota {
        serde_json::from_value(value).unwrap()
    }

    fn counted(name: &str, hard: &str, used: &str) -> ResourceQuota {
        quota(json!({"metadata": {"name": name, "namespace": "team"},
            "spec": {"hard": {COUNT: hard}},
            "status": {"hard": {COUNT: hard, "pods": "10"}, "used": {COUNT: used, "pods": "3"}}}))
    }

    fn used_of(quota: &ResourceQuota) -> &str {
        &used(quota, COUNT).unwrap().0
    }

    #[test]
    fn room_left_raises_used_by_one_and_leaves_other_resources() {
        let charged = charge(&[counted("q", "5", "2")], COUNT).unwrap();
        assert_eq!(charged.len(), 1);
        assert_eq!(used_of(&charged[0]), "3");
        assert_eq!(used(&charged[0], "pods").unwrap().0, "3");
        // The last free place is still a place.
        let charged = charge(&[counted("q", "3", "2")], COUNT).unwrap();
        assert_eq!(used_of(&charged[0]), "3");
    }

    #[test]
    fn a_full_quota_refuses_with_kube_apiservers_words() {
        let refusal = charge(&[counted("a", "9", "0"), counted("b", "2", "2")], COUNT).unwrap_err();
        assert_eq!(
            refusal.message(),
            format!("exceeded quota: b, requested: {COUNT}=1, used: {COUNT}=2, limited: {COUNT}=2")
        );
    }

    #[test]
    fn limits_are_quantities_not_just_integers() {
        assert!(charge(&[counted("q", "1k", "999")], COUNT).is_ok());
        let refusal = charge(&[counted("q", "1k", "1000")], COUNT).unwrap_err();
        assert!(
            refusal
                .message()
                .ends_with("limited: count/widgets.example.com=1k")
        );
        let refusal = charge(&[counted("q", "1e2x", "0")], COUNT).unwrap_err();
        assert!(matches!(refusal, QuotaRefusal::Unreadable { .. }));
    }

    #[test]
    fn an_uncounted_quota_is_status_unknown() {
        let fresh = quota(json!({"metadata": {"name": "fresh"},
            "status": {"hard": {COUNT: "4"}}}));
        assert_eq!(
            charge(&[fresh], COUNT).unwrap_err().message(),
            format!("status unknown for quota: fresh, resources: {COUNT}")
        );
    }

    #[test]
    fn quotas_that_do_not_constrain_the_resource_cost_nothing() {
        let others = quota(json!({"metadata": {"name": "pods"},
            "status": {"hard": {"pods": "1"}, "used": {"pods": "1"}}}));
        // Only spec: the controller has not made it a limit yet.
        let unsynced = quota(json!({"metadata": {"name": "new"}, "spec": {"hard": {COUNT: "0"}}}));
        let scoped = quota(json!({"metadata": {"name": "scoped"},
            "spec": {"hard": {COUNT: "0"}, "scopes": ["Terminating"]},
            "status": {"hard": {COUNT: "0"}, "used": {COUNT: "0"}}}));
        let selected = quota(json!({"metadata": {"name": "selected"},
            "spec": {"hard": {COUNT: "0"}, "scopeSelector": {"matchExpressions":
                [{"scopeName": "PriorityClass", "operator": "Exists"}]}},
            "status": {"hard": {COUNT: "0"}, "used": {COUNT: "0"}}}));
        assert_eq!(
            charge(&[others, unsynced, scoped, selected], COUNT),
            Ok(vec![])
        );
        assert_eq!(charge(&[], COUNT), Ok(vec![]));
    }

    #[test]
    fn every_constraining_quota_is_charged() {
        let charged = charge(&[counted("a", "5", "1"), counted("b", "7", "4")], COUNT).unwrap();
        let names: Vec<_> = charged.iter().map(|q| (name_of(q), used_of(q))).collect();
        assert_eq!(names, [("a", "2"), ("b", "5")]);
    }
}
