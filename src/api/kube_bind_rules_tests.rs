//! bindery's generated CRDs hold every rule kube-bind's `v1alpha2`-era CRDs
//! hold, per version: the list below is kube-bind's validation (patterns,
//! minimum lengths and items, defaults, enums, required fields, CEL rules),
//! written from its CRDs' documented schema, and each entry is looked up in
//! [`crds`]. Where bindery is looser on purpose (its extensions), the rule
//! that stands in is checked instead (docs/DESIGN.md, "Coming from
//! kube-bind").

use super::crds;
use super::kube_bind_rules::ALSO_V1ALPHA1;
use serde_json::{Value, json};

/// kube-bind's rules, one a line: CRD, versions (`1`, `2` or `1,2` for
/// `v1alpha1` and `v1alpha2`), the schema node's path (`.spec.resources[]`;
/// `.` is the root), the key, and its value as JSON. For `required`, at
/// least these; for `enum`, these; for `x-kubernetes-validations`, these
/// among its rules. `$GROUP`, `$RESOURCE` and `$VERSION` stand for
/// kube-bind's name patterns; `@claims`, `@resources`, `@groupresources` and
/// `@versions` for the rules every such list has (see [`expand`]).
const RULES: &str = r#"
apiservicebindings 1,2 .spec required ["kubeconfigSecretRef"]
apiservicebindings 1,2 .spec.kubeconfigSecretRef required ["key","name","namespace"]
apiservicebindings 1,2 .spec.kubeconfigSecretRef x-kubernetes-validations [{"rule":"self == oldSelf","message":"kubeconfigSecretRef is immutable"}]
apiservicebindings 1 .spec.kubeconfigSecretRef.key enum ["kubeconfig"]
apiservicebindings 1,2 .spec.kubeconfigSecretRef.name minLength 1
apiservicebindings 1,2 .spec.kubeconfigSecretRef.namespace minLength 1
apiservicebindings 1,2 .status.conditions[] required ["lastTransitionTime","status","type"]
apiservicebindings 2 .status.boundSchemas @resources
apiservicebindings 2 .status.permissionClaims @claims

apiserviceexportrequests 1,2 . required ["spec"]
apiserviceexportrequests 1,2 .spec.parameters x-kubernetes-preserve-unknown-fields true
apiserviceexportrequests 1,2 .spec.parameters x-kubernetes-validations [{"rule":"self == oldSelf","message":"parameters are immutable"}]
apiserviceexportrequests 1,2 .spec.resources x-kubernetes-validations [{"rule":"self == oldSelf","message":"resources are immutable"}]
apiserviceexportrequests 1,2 .spec.resources @resources
apiserviceexportrequests 1,2 .status default {}
apiserviceexportrequests 1,2 .status.phase default "Pending"
apiserviceexportrequests 1,2 .status.phase enum ["Pending","Failed","Succeeded"]
apiserviceexportrequests 1,2 .status.conditions[] required ["lastTransitionTime","status","type"]
apiserviceexportrequests 2 .spec.namespaces x-kubernetes-validations [{"rule":"self == oldSelf","message":"namespaces are immutable"}]
apiserviceexportrequests 2 .spec.namespaces[] required ["name"]
apiserviceexportrequests 2 .spec.permissionClaims x-kubernetes-validations [{"rule":"self == oldSelf","message":"permissionClaims are immutable"}]
apiserviceexportrequests 2 .spec.permissionClaims @claims
apiserviceexportrequests 2 .spec.schemaUpdatePolicy default "Never"
apiserviceexportrequests 2 .spec.schemaUpdatePolicy enum ["Never","Always"]
apiserviceexportrequests 2 .spec.schemaUpdatePolicy x-kubernetes-validations [{"rule":"self == oldSelf","message":"schemaUpdatePolicy is immutable"}]

apiserviceexports 1,2 . required ["spec"]
apiserviceexports 1,2 .spec.clusterScopedIsolation enum ["Prefixed","Namespaced","None"]
apiserviceexports 1,2 .spec.informerScope enum ["Cluster","Namespaced"]
apiserviceexports 1,2 .spec.informerScope x-kubernetes-validations [{"rule":"self == oldSelf","message":"informerScope is immutable"}]
apiserviceexports 1,2 .status.conditions[] required ["lastTransitionTime","status","type"]
apiserviceexports 2 .spec required ["informerScope","isolation","resources"]
apiserviceexports 2 .spec.clusterScopedIsolation x-kubernetes-validations [{"rule":"self == oldSelf","message":"clusterScopedIsolation is immutable"}]
apiserviceexports 2 .spec.isolation enum ["Prefixed","Namespaced","None"]
apiserviceexports 2 .spec.isolation x-kubernetes-validations [{"rule":"self == oldSelf","message":"isolation is immutable"}]
apiserviceexports 2 .spec.permissionClaims x-kubernetes-validations [{"rule":"self == oldSelf","message":"permissionClaims are immutable"}]
apiserviceexports 2 .spec.permissionClaims @claims
apiserviceexports 2 .spec.resources x-kubernetes-validations [{"rule":"self == oldSelf","message":"resources are immutable"}]
apiserviceexports 2 .spec.resources @resources
apiserviceexports 1 . x-kubernetes-validations [{"rule":"self.metadata.name == self.spec.names.plural+\".\"+self.spec.group","message":"informerScope is immutable"}]
apiserviceexports 1 .spec required ["group","informerScope","names","scope","versions"]
apiserviceexports 1 .spec x-kubernetes-validations [{"rule":"self.scope == \"Namespaced\" || self.informerScope == \"Cluster\"","message":"informerScope must be Cluster for cluster-scoped resources"},{"rule":"self.scope == \"Namespaced\" || has(self.clusterScopedIsolation)","message":"clusterScopedIsolation must be defined for cluster-scoped resources"},{"rule":"self.scope == \"Cluster\" || !has(self.clusterScopedIsolation)","message":"clusterScopedIsolation is not relevant for namespaced resources"}]
apiserviceexports 1 .spec.names required ["kind","plural"]
apiserviceexports 1 .spec.scope enum ["Cluster","Namespaced"]
apiserviceexports 1 .spec.versions @versions
apiserviceexports 1 .spec.versions[].schema required ["openAPIV3Schema"]
apiserviceexports 1 .spec.versions[].schema.openAPIV3Schema x-kubernetes-preserve-unknown-fields true
apiserviceexports 1 .spec.versions[].schema.openAPIV3Schema x-kubernetes-map-type "atomic"
apiserviceexports 1 .status.acceptedNames required ["kind","plural"]

apiserviceexporttemplates 2 . required ["spec"]
apiserviceexporttemplates 2 .spec.namespaces[] required ["name"]
apiserviceexporttemplates 2 .spec.permissionClaims @claims
apiserviceexporttemplates 2 .spec.resources @resources
apiserviceexporttemplates 2 .spec.schemaUpdatePolicy default "Never"
apiserviceexporttemplates 2 .spec.schemaUpdatePolicy enum ["Never","Always"]
apiserviceexporttemplates 2 .spec.scope enum ["Cluster","Namespaced"]
apiserviceexporttemplates 2 .status.conditions[] required ["lastTransitionTime","status","type"]

boundschemas 2 .spec required ["group","informerScope","names","scope","versions"]
boundschemas 2 .spec.conversion x-kubernetes-validations [{"rule":"(self.strategy == 'None' && !has(self.webhook)) || (self.strategy == 'Webhook' && has(self.webhook))","message":"Webhook must be specified if strategy=Webhook"}]
boundschemas 2 .spec.conversion.strategy enum ["None","Webhook"]
boundschemas 2 .spec.conversion.webhook.clientConfig.url format "uri"
boundschemas 2 .spec.informerScope enum ["Cluster","Namespaced"]
boundschemas 2 .spec.names required ["kind","plural"]
boundschemas 2 .spec.scope enum ["Cluster","Namespaced"]
boundschemas 2 .spec.versions @versions
boundschemas 2 .spec.versions[].schema x-kubernetes-preserve-unknown-fields true
boundschemas 2 .spec.versions[].schema x-kubernetes-map-type "atomic"
boundschemas 2 .status.acceptedNames required ["kind","plural"]
boundschemas 2 .status.conditions[] required ["lastTransitionTime","status","type"]

clusterbindings 1,2 . required ["spec"]
clusterbindings 1,2 . x-kubernetes-validations [{"rule":"self.metadata.name == \"cluster\"","message":"cluster binding name should be cluster"}]
clusterbindings 1,2 .spec required ["kubeconfigSecretRef","providerPrettyName"]
clusterbindings 1,2 .spec.kubeconfigSecretRef required ["key","name"]
clusterbindings 1,2 .spec.kubeconfigSecretRef x-kubernetes-validations [{"rule":"self == oldSelf","message":"kubeconfigSecretRef is immutable"}]
clusterbindings 1 .spec.kubeconfigSecretRef.key enum ["kubeconfig"]
clusterbindings 1,2 .spec.kubeconfigSecretRef.name minLength 1
clusterbindings 1,2 .spec.providerPrettyName minLength 1
clusterbindings 1,2 .spec.serviceProviderSpec x-kubernetes-preserve-unknown-fields true
clusterbindings 1,2 .status.conditions[] required ["lastTransitionTime","status","type"]
clusterbindings 2 .status.consumerSecretRef required ["name","namespace"]
clusterbindings 2 .status.consumerSecretRef.name minLength 1
clusterbindings 2 .status.consumerSecretRef.namespace minLength 1
"#;

const GROUP: &str = r"^(|[a-z0-9]([-a-z0-9]*[a-z0-9](\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)?)$";
const RESOURCE: &str = r"^[a-z][-a-z0-9]*[a-z0-9]$";
const VERSION: &str = r"^v[1-9][0-9]*([a-z]+[1-9][0-9]*)?$";

/// The rules every list of a kind has, at the list's path `{}`.
fn expand(list: &str) -> &'static [&'static str] {
    match list {
        // A list of group/resource pairs.
        "@groupresources" => &[
            r#"{}[] required ["resource"]"#,
            r#"{}[].group pattern "$GROUP""#,
            r#"{}[].group default """#,
            r#"{}[].resource pattern "$RESOURCE""#,
        ],
        // Resources: at least one.
        "@resources" => &["{} @groupresources", "{} minItems 1"],
        // Permission claims: a selector always; references with a path.
        "@claims" => &[
            "{} @groupresources",
            r#"{}[] required ["resource","selector"]"#,
            "{}[].selector.references @groupresources",
            r#"{}[].selector.references[] required ["jsonPath","resource"]"#,
            r#"{}[].selector.namedResources[] required ["name"]"#,
            r#"{}[].selector.labelSelector.matchExpressions[] required ["key","operator"]"#,
        ],
        // A CRD's versions.
        "@versions" => &[
            "{} minItems 1",
            r#"{} x-kubernetes-list-type "map""#,
            r#"{} x-kubernetes-list-map-keys ["name"]"#,
            r#"{}[] required ["name","schema","served","storage"]"#,
            r#"{}[].name pattern "$VERSION""#,
            "{}[].name minLength 1",
            "{}[].served default true",
            r#"{}[].additionalPrinterColumns x-kubernetes-list-type "map""#,
            r#"{}[].additionalPrinterColumns x-kubernetes-list-map-keys ["name"]"#,
            r#"{}[].additionalPrinterColumns[] required ["jsonPath","name","type"]"#,
            r#"{}[].subresources.scale required ["specReplicasPath","statusReplicasPath"]"#,
        ],
        other => panic!("no rules {other}"),
    }
}

/// One of kube-bind's rules: in CRD `plural`, at `version`, the schema node
/// at `path` has `key` with `value`.
#[derive(Debug)]
struct Expected {
    plural: String,
    version: String,
    path: String,
    key: String,
    value: Value,
}

/// `<path> <key> <JSON>` or `<path> @<list>`, for `plural` at `versions`.
fn parse(plural: &str, versions: &str, rest: &str, into: &mut Vec<Expected>) {
    let (path, rest) = rest.split_once(' ').expect("a path");
    if let Some(list) = rest.strip_prefix('@') {
        for line in expand(&format!("@{list}")) {
            parse(plural, versions, &line.replace("{}", path), into);
        }
        return;
    }
    let (key, value) = rest.split_once(' ').expect("a key and a value");
    let value = value
        .replace("$GROUP", &GROUP.replace('\\', "\\\\"))
        .replace("$RESOURCE", RESOURCE)
        .replace("$VERSION", VERSION);
    let value: Value =
        serde_json::from_str(&value).unwrap_or_else(|e| panic!("{plural} {path} {key}: {e}"));
    for version in versions.split(',') {
        into.push(Expected {
            plural: plural.to_string(),
            version: format!("v1alpha{version}"),
            path: path.to_string(),
            key: key.to_string(),
            value: value.clone(),
        });
    }
}

/// kube-bind's rules, as its CRDs hold them.
fn kube_binds_rules() -> Vec<Expected> {
    let mut rules = Vec::new();
    for line in RULES.lines().filter(|l| !l.trim().is_empty()) {
        let mut parts = line.splitn(3, ' ');
        let (Some(plural), Some(versions), Some(rest)) = (parts.next(), parts.next(), parts.next())
        else {
            panic!("not a rule: {line}");
        };
        parse(plural, versions, rest, &mut rules);
    }
    rules
}

/// Where bindery is looser than kube-bind on purpose: kube-bind's required
/// `field` (of `.spec`) may be left out when bindery's extension `instead`
/// is set, and a rule says so.
const LOOSER: [(&str, &[&str], &str, &str); 3] = [
    (
        "apiserviceexportrequests",
        &["v1alpha1", "v1alpha2"],
        "resources",
        "templateRef",
    ),
    (
        "apiserviceexporttemplates",
        &["v1alpha2"],
        "resources",
        "APIServiceSelector",
    ),
    (
        "apiserviceexporttemplates",
        &["v1alpha2"],
        "scope",
        "APIServiceSelector",
    ),
];

/// The schema of `plural` at `version`, as JSON.
fn schema(plural: &str, version: &str) -> Value {
    let crd = crds()
        .into_iter()
        .find(|c| c.spec.names.plural == plural)
        .unwrap_or_else(|| panic!("no CRD {plural}"));
    let version = crd
        .spec
        .versions
        .iter()
        .find(|v| v.name == version)
        .unwrap_or_else(|| panic!("{plural} serves no {version}"));
    serde_json::to_value(&version.schema).unwrap()["openAPIV3Schema"].clone()
}

/// The node at `path` (`.spec.resources[].group`; `.` is the root).
fn node<'a>(root: &'a Value, path: &str) -> Option<&'a Value> {
    let mut node = root;
    for step in path.split('.').filter(|s| !s.is_empty()) {
        let (name, items) = match step.strip_suffix("[]") {
            Some(name) => (name, true),
            None => (step, false),
        };
        node = node.get("properties")?.get(name)?;
        if items {
            node = node.get("items")?;
        }
    }
    Some(node)
}

/// Whether `found` holds what `expected` asks of `key`.
fn holds(key: &str, expected: &Value, found: Option<&Value>) -> bool {
    let Some(found) = found else {
        return false;
    };
    let contains_all = |expected: &Value| {
        let found = found.as_array().cloned().unwrap_or_default();
        expected
            .as_array()
            .unwrap()
            .iter()
            .all(|e| found.iter().any(|f| subset(e, f)))
    };
    match key {
        "required" | "x-kubernetes-validations" => contains_all(expected),
        "enum" => {
            contains_all(expected)
                && found.as_array().map(Vec::len) == expected.as_array().map(Vec::len)
        }
        _ => found == expected,
    }
}

/// `expected`'s fields all in `found` (a rule may say more, e.g. a reason).
fn subset(expected: &Value, found: &Value) -> bool {
    match (expected, found) {
        (Value::Object(expected), Value::Object(found)) => {
            expected.iter().all(|(k, v)| found.get(k) == Some(v))
        }
        _ => expected == found,
    }
}

#[test]
fn every_rule_of_kube_binds_crds_is_in_binderys_per_version() {
    let mut missing = Vec::new();
    let rules = kube_binds_rules();
    assert!(
        rules.len() > 150,
        "the list is kube-bind's whole validation"
    );
    for rule in &rules {
        let root = schema(&rule.plural, &rule.version);
        let found = node(&root, &rule.path).and_then(|n| n.get(&rule.key));
        if !holds(&rule.key, &rule.value, found) {
            missing.push(format!(
                "{} {} {} {}: kube-bind has {}, bindery {}",
                rule.plural,
                rule.version,
                rule.path,
                rule.key,
                rule.value,
                found.map(Value::to_string).unwrap_or("nothing".into())
            ));
        }
    }
    assert!(missing.is_empty(), "missing:\n{}", missing.join("\n"));
}

#[test]
fn where_bindery_is_looser_a_rule_requires_the_field_unless_the_extension_is_set() {
    for (plural, versions, field, instead) in LOOSER {
        for version in versions {
            let spec = node(&schema(plural, version), ".spec").unwrap().clone();
            let required = spec["required"].as_array().cloned().unwrap_or_default();
            assert!(
                !required.contains(&json!(field)),
                "{plural} {version}: {field} is required only without {instead}"
            );
            assert!(
                holds(
                    "x-kubernetes-validations",
                    &json!([{
                        "rule": format!("has(self.{field}) || has(self.{instead})"),
                        "fieldPath": format!(".{field}"),
                        "reason": "FieldValueRequired",
                    }]),
                    spec.get("x-kubernetes-validations"),
                ),
                "{plural} {version}: {spec}"
            );
        }
    }
}

#[test]
fn the_kinds_kube_bind_serves_at_v1alpha1_are_served_at_both_versions() {
    for crd in crds() {
        let versions: Vec<(&str, bool, bool)> = crd
            .spec
            .versions
            .iter()
            .map(|v| (v.name.as_str(), v.served, v.storage))
            .collect();
        let expected: &[(&str, bool, bool)] =
            if ALSO_V1ALPHA1.contains(&crd.spec.names.plural.as_str()) {
                &[("v1alpha2", true, true), ("v1alpha1", true, false)]
            } else {
                &[("v1alpha2", true, true)]
            };
        assert_eq!(versions, expected, "{}", crd.spec.names.plural);
    }
}

#[test]
fn v1alpha1_keeps_binderys_fields_so_an_old_client_prunes_nothing() {
    // A v1alpha1 client reads and writes the objects bindery wrote at
    // v1alpha2 (conversion None): its fields must be in v1alpha1's schema.
    for (plural, path) in [
        ("apiservicebindings", ".spec.permissionClaims[].state"),
        ("apiserviceexports", ".status.identityHash"),
        ("apiserviceexports", ".spec.resources[].resource"),
        ("apiserviceexportrequests", ".spec.templateRef.name"),
    ] {
        assert!(
            node(&schema(plural, "v1alpha1"), path).is_some(),
            "{plural} v1alpha1 {path}"
        );
    }
    // ... without v1alpha2's rules on what v1alpha1 has otherwise.
    let export = schema("apiserviceexports", "v1alpha1");
    assert_eq!(
        node(&export, ".spec.clusterScopedIsolation").unwrap()["x-kubernetes-validations"],
        Value::Null
    );
}
