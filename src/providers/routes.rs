//! Which provider owns a request: a namespace belongs to the provider its
//! app-cluster Namespace names in the label [`PROVIDER_LABEL`], else to
//! the default provider; what is not in a namespace (discovery, a
//! cluster-scoped resource) is the default provider's. Pure.

use crate::status::ApiError;
use std::collections::BTreeMap;

/// The label of an app-cluster Namespace that names its provider.
pub const PROVIDER_LABEL: &str = "bindery.dev/provider";

/// The label of an app-cluster Namespace whose objects may each name their
/// provider ([`OBJECT_PROVIDER_ANNOTATION`]): its reads ask every provider.
pub const OBJECT_ROUTING_LABEL: &str = "bindery.dev/object-routing";

/// The annotation of an object, in a namespace with object routing, that
/// names its provider (kube-bind's pull request #594 routes objects so).
pub const OBJECT_PROVIDER_ANNOTATION: &str = "bindery.dev/provider";

/// The label of an app-cluster Namespace whose objects are being moved to
/// the provider it names (`bindery move-namespace`): its writes wait.
pub const MOVING_LABEL: &str = "bindery.dev/moving-to";

/// The providers a router knows, by name, in the order their versions are
/// written in a merged resourceVersion (`super::version`): sorted by name,
/// so that the order does not hang on the order of the flags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Routes {
    names: Vec<String>,
    default: usize,
}

impl Routes {
    /// The providers `names` (distinct DNS labels), `default` among them.
    pub fn new(mut names: Vec<String>, default: &str) -> Result<Self, String> {
        names.sort();
        if let Some(pair) = names.windows(2).find(|pair| pair[0] == pair[1]) {
            return Err(format!("the provider {} is named twice", pair[0]));
        }
        if let Some(bad) = names.iter().find(|n| !crate::route::is_dns_label(n)) {
            return Err(format!("a provider's name must be a DNS label: {bad:?}"));
        }
        let default = names
            .iter()
            .position(|name| name == default)
            .ok_or_else(|| format!("the default provider {default:?} is not one of {names:?}"))?;
        Ok(Self { names, default })
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The default provider's place.
    pub fn default(&self) -> usize {
        self.default
    }

    /// The provider of the namespace `namespace`, whose app-cluster
    /// Namespace has `labels` (`None`: no such Namespace seen, or none yet).
    /// A Namespace naming a provider the router does not know is refused,
    /// never sent to another: its objects are not there.
    pub fn of_namespace(
        &self,
        namespace: &str,
        labels: Option<&BTreeMap<String, String>>,
    ) -> Result<usize, ApiError> {
        let Some(named) = labels.and_then(|labels| labels.get(PROVIDER_LABEL)) else {
            return Ok(self.default);
        };
        self.names
            .iter()
            .position(|name| name == named)
            .ok_or_else(|| {
                ApiError::unavailable(format!(
                    "the namespace {namespace} belongs to the provider {named:?}, which this router does not reach"
                ))
            })
    }
}

/// Whether a Namespace with `labels` lets each object name its provider.
pub fn routes_objects(labels: Option<&BTreeMap<String, String>>) -> bool {
    labels
        .and_then(|labels| labels.get(OBJECT_ROUTING_LABEL))
        .is_some_and(|v| v == "true")
}

impl Routes {
    /// The provider of an object of `namespace` (whose Namespace has
    /// `labels`) with `annotations`: the one it names where the namespace
    /// routes objects, else the namespace's. A name the router does not
    /// know is kube-apiserver's 422 for an unsupported value.
    pub fn of_object(
        &self,
        namespace: &str,
        labels: Option<&BTreeMap<String, String>>,
        annotations: Option<&serde_json::Value>,
    ) -> Result<usize, ApiError> {
        let named = annotations
            .and_then(|a| a.get(OBJECT_PROVIDER_ANNOTATION))
            .and_then(serde_json::Value::as_str);
        match named {
            Some(named) if routes_objects(labels) => self
                .names
                .iter()
                .position(|name| name == named)
                .ok_or_else(|| {
                    ApiError::generic_invalid(format!(
                        "metadata.annotations[{OBJECT_PROVIDER_ANNOTATION}]: Unsupported value: \"{named}\": supported values: {}",
                        self.names.iter().map(|n| format!("\"{n}\"")).collect::<Vec<_>>().join(", ")
                    ))
                }),
            _ => self.of_namespace(namespace, labels),
        }
    }
}

/// A write in `namespace`, whose Namespace has `labels`: refused while its
/// objects move to another provider, as kube-apiserver refuses what it
/// cannot take now (503 with a time to come back), so that clients and
/// controllers try again rather than write where the objects no longer are.
pub fn may_write(
    namespace: &str,
    labels: Option<&BTreeMap<String, String>>,
) -> Result<(), ApiError> {
    match labels.and_then(|labels| labels.get(MOVING_LABEL)) {
        Some(to) => {
            let mut error = ApiError::unavailable(format!(
                "the namespace {namespace} is moving to the provider {to}: try again shortly"
            ));
            error.retry_after = Some(1);
            Err(error)
        }
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(provider: &str) -> BTreeMap<String, String> {
        BTreeMap::from([(PROVIDER_LABEL.to_string(), provider.to_string())])
    }

    #[test]
    fn a_namespace_goes_to_the_provider_it_names_else_to_the_default() {
        let routes = Routes::new(vec!["west".into(), "east".into()], "west").expect("routes");
        assert_eq!(routes.names(), ["east", "west"]);
        assert_eq!(routes.default(), 1);
        assert_eq!(routes.of_namespace("a", None), Ok(1));
        assert_eq!(routes.of_namespace("a", Some(&BTreeMap::new())), Ok(1));
        assert_eq!(routes.of_namespace("a", Some(&labels("east"))), Ok(0));
        let unknown = routes
            .of_namespace("a", Some(&labels("north")))
            .expect_err("an unknown provider");
        assert_eq!(unknown.code, 503);
        assert!(unknown.message.contains("north"), "{}", unknown.message);
    }

    #[test]
    fn an_object_names_its_provider_where_its_namespace_routes_objects() {
        let routes = Routes::new(vec!["east".into(), "west".into()], "east").expect("routes");
        let annotations = serde_json::json!({OBJECT_PROVIDER_ANNOTATION: "west"});
        let routing = BTreeMap::from([(OBJECT_ROUTING_LABEL.to_string(), "true".to_string())]);
        assert_eq!(
            routes.of_object("a", Some(&routing), Some(&annotations)),
            Ok(1)
        );
        assert_eq!(
            routes.of_object("a", None, Some(&annotations)),
            Ok(0),
            "not without the label"
        );
        assert_eq!(routes.of_object("a", Some(&routing), None), Ok(0));
        let unknown = serde_json::json!({OBJECT_PROVIDER_ANNOTATION: "north"});
        let error = routes
            .of_object("a", Some(&routing), Some(&unknown))
            .expect_err("unknown");
        assert_eq!(error.code, 422);
        assert!(
            error.message.contains("Unsupported value: \"north\""),
            "{}",
            error.message
        );
    }

    #[test]
    fn writes_wait_while_a_namespace_moves() {
        assert_eq!(may_write("a", None), Ok(()));
        assert_eq!(may_write("a", Some(&labels("east"))), Ok(()));
        let moving = BTreeMap::from([(MOVING_LABEL.to_string(), "west".to_string())]);
        let error = may_write("a", Some(&moving)).expect_err("moving");
        assert_eq!((error.code, error.retry_after), (503, Some(1)));
        assert!(
            error.message.contains("moving to the provider west"),
            "{}",
            error.message
        );
    }

    #[test]
    fn providers_are_distinct_labels_and_the_default_is_one_of_them() {
        assert!(Routes::new(vec!["a".into(), "a".into()], "a").is_err());
        assert!(Routes::new(vec!["A".into()], "A").is_err());
        assert!(Routes::new(vec!["a".into()], "b").is_err());
    }
}
