//! The REST routes kube-apiserver documents for a CRD version, with the
//! descriptions, operation ids, tags, parameters and responses its OpenAPI
//! builder gives them (`builder.generateBuilder`/`buildRoute` and
//! `endpoints/openapi.GetOperationIDAndTags`), independent of the OpenAPI
//! version they are written in.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionVersion;
use serde_json::Value;

use super::schema::{Flavor, definition_name};
use crate::discovery::served::Crd;

/// A type a route reads or writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Model {
    Kind,
    List,
    Status,
    Scale,
    DeleteOptions,
    Patch,
}

pub(crate) const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
const SCALE: &str = "io.k8s.api.autoscaling.v1.Scale";
const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";

pub(crate) const PRODUCES: [&str; 2] = ["application/json", "application/yaml"];
const CONSUMES: [&str; 2] = ["application/json", "application/yaml"];
const CONSUMES_PATCH: [&str; 3] = [
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
];

/// One documented route.
#[derive(Debug, Clone)]
pub(crate) struct Route {
    pub path: String,
    /// Lower-case HTTP method: `get`, `put`, `post`, `delete`, `patch`.
    pub method: &'static str,
    /// `x-kubernetes-action`, also the key of the action's query parameters.
    pub action: &'static str,
    pub description: String,
    pub operation_id: String,
    pub tag: String,
    /// The model of every success response.
    pub model: Model,
    /// Success responses: (code, message).
    pub responses: Vec<(u16, &'static str)>,
    /// The request body: model, required.
    pub body: Option<(Model, bool)>,
    pub consumes: &'static [&'static str],
    /// `x-kubernetes-group-version-kind`: group, version, kind.
    pub gvk: (String, String, String),
}

impl Route {
    /// The definition name of `model` for this route's kind.
    pub fn model_name(&self, model: Model, crd: &Crd) -> String {
        let (group, version, _) = &self.gvk;
        match model {
            Model::Kind => definition_name(group, version, crd.kind),
            Model::List => definition_name(group, version, &crd.list_kind),
            Model::Status => STATUS.into(),
            Model::Scale => SCALE.into(),
            Model::DeleteOptions => DELETE_OPTIONS.into(),
            Model::Patch => PATCH.into(),
        }
    }

    /// `{"$ref": …}` to `model`.
    pub fn model_ref(&self, model: Model, crd: &Crd, flavor: Flavor) -> Value {
        serde_json::json!({"$ref": flavor.reference(&self.model_name(model, crd))})
    }

    pub fn has_namespace(&self) -> bool {
        self.path.contains("{namespace}")
    }

    pub fn has_name(&self) -> bool {
        self.path.contains("{name}")
    }
}

/// `endpoints.GetArticleForNoun(noun, " ")`.
fn article(noun: &str) -> &'static str {
    if !noun.ends_with("ss") && noun.ends_with('s') {
        return " ";
    }
    match noun.chars().next().map(|c| c.to_ascii_lowercase()) {
        Some('a' | 'e' | 'i' | 'o' | 'u') => " an ",
        _ => " a ",
    }
}

/// `builder.descriptionFor`.
fn description(kind: &str, sub: &str, verb: &str) -> String {
    let article = match verb {
        "list" => " objects of kind ",
        "read" | "replace" | "patch" => " the specified ",
        "create" | "delete" => article(kind),
        _ => "",
    };
    let sub = if sub.is_empty() {
        String::new()
    } else {
        format!(" {sub} of")
    };
    match verb {
        "patch" => format!("partially update{sub}{article}{kind}"),
        "deletecollection" => {
            let sub = if sub.is_empty() {
                sub
            } else {
                format!("{sub} a")
            };
            format!("delete collection of{sub} {kind}")
        }
        _ => format!("{verb}{sub}{article}{kind}"),
    }
}

/// `endpoints/openapi.ToValidOperationID`.
pub(crate) fn valid_operation_id(s: &str, capitalize_first: bool) -> String {
    let mut out = String::with_capacity(s.len());
    let mut capitalize = capitalize_first;
    for (i, c) in s.char_indices() {
        if c.is_alphabetic() || c == '_' || (i != 0 && c.is_numeric()) {
            if capitalize {
                out.extend(c.to_uppercase());
                capitalize = false;
            } else {
                out.push(c);
            }
        } else {
            capitalize = true;
        }
    }
    out
}

const VERB_PREFIXES: [&str; 12] = [
    "get",
    "log",
    "read",
    "replace",
    "patch",
    "delete",
    "deletecollection",
    "watch",
    "connect",
    "proxy",
    "list",
    "create",
];

/// `endpoints/openapi.GetOperationIDAndTags`: the verb (the shortest known
/// prefix), then group and version from the path, then the rest.
fn operation_id_and_tag(operation: &str, path: &str) -> (String, String) {
    let prefix = (1..=operation.len())
        .filter(|&i| operation.is_char_boundary(i))
        .map(|i| &operation[..i])
        .find(|p| VERB_PREFIXES.contains(p))
        .unwrap_or_default();
    let rest = &operation[prefix.len()..];
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let mut id = prefix.to_string();
    let mut tag = String::new();
    if parts.len() >= 2 && parts[0] == "apis" {
        let group = parts[1].strip_suffix(".k8s.io").unwrap_or(parts[1]);
        id.push_str(&valid_operation_id(group, !id.is_empty()));
        tag = valid_operation_id(group, false);
        if parts.len() > 2 {
            id.push_str(&valid_operation_id(parts[2], !id.is_empty()));
            tag = format!("{tag}_{}", valid_operation_id(parts[2], false));
        }
    }
    let id = format!("{id}{}", valid_operation_id(rest, !prefix.is_empty()));
    (id, tag)
}

fn title(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// The routes of `crd` in `version`, in kube-apiserver's order.
pub(crate) fn routes(crd: &Crd, version: &CustomResourceDefinitionVersion) -> Vec<Route> {
    let (group, v, kind) = (crd.group, version.name.as_str(), crd.kind);
    let namespaced = if crd.namespaced { "Namespaced" } else { "" };
    let mut out = Vec::new();
    let mut add = |root: &str,
                   sub_path: &str,
                   method: &'static str,
                   action: &'static str,
                   verb: &str,
                   model: Model,
                   body: Option<(Model, bool)>,
                   operation: Option<String>| {
        let sub = match sub_path.split('/').collect::<Vec<_>>().as_slice() {
            [_, _, s] => *s,
            _ => "",
        };
        let path = format!("{root}{sub_path}");
        let operation =
            operation.unwrap_or_else(|| format!("{verb}{namespaced}{kind}{}", title(sub)));
        let (operation_id, tag) = operation_id_and_tag(&operation, &path);
        let mut responses = vec![(200, "OK")];
        match action {
            "post" => responses.extend([(201, "Created"), (202, "Accepted")]),
            "delete" => responses.push((202, "Accepted")),
            "put" => responses.push((201, "Created")),
            _ => {}
        }
        out.push(Route {
            description: description(kind, sub, verb),
            path,
            method,
            action,
            operation_id,
            tag,
            model,
            responses,
            body,
            consumes: if method == "patch" {
                &CONSUMES_PATCH
            } else {
                &CONSUMES
            },
            gvk: (group.to_string(), v.to_string(), kind.to_string()),
        });
    };
    let mut root = format!("/apis/{group}/{v}/{}", crd.plural);
    if crd.namespaced {
        add(
            &root,
            "",
            "get",
            "list",
            "list",
            Model::List,
            None,
            Some(format!("list{kind}ForAllNamespaces")),
        );
        root = format!("/apis/{group}/{v}/namespaces/{{namespace}}/{}", crd.plural);
    }
    add(&root, "", "get", "list", "list", Model::List, None, None);
    add(
        &root,
        "",
        "post",
        "post",
        "create",
        Model::Kind,
        Some((Model::Kind, true)),
        None,
    );
    add(
        &root,
        "",
        "delete",
        "deletecollection",
        "deletecollection",
        Model::Status,
        None,
        None,
    );
    add(
        &root,
        "/{name}",
        "get",
        "get",
        "read",
        Model::Kind,
        None,
        None,
    );
    add(
        &root,
        "/{name}",
        "put",
        "put",
        "replace",
        Model::Kind,
        Some((Model::Kind, true)),
        None,
    );
    add(
        &root,
        "/{name}",
        "delete",
        "delete",
        "delete",
        Model::Status,
        Some((Model::DeleteOptions, false)),
        None,
    );
    add(
        &root,
        "/{name}",
        "patch",
        "patch",
        "patch",
        Model::Kind,
        Some((Model::Patch, true)),
        None,
    );
    let sub = version.subresources.as_ref();
    if sub.is_some_and(|s| s.status.is_some()) {
        add(
            &root,
            "/{name}/status",
            "get",
            "get",
            "read",
            Model::Kind,
            None,
            None,
        );
        add(
            &root,
            "/{name}/status",
            "put",
            "put",
            "replace",
            Model::Kind,
            Some((Model::Kind, true)),
            None,
        );
        add(
            &root,
            "/{name}/status",
            "patch",
            "patch",
            "patch",
            Model::Kind,
            Some((Model::Patch, true)),
            None,
        );
    }
    if sub.is_some_and(|s| s.scale.is_some()) {
        add(
            &root,
            "/{name}/scale",
            "get",
            "get",
            "read",
            Model::Scale,
            None,
            None,
        );
        add(
            &root,
            "/{name}/scale",
            "put",
            "put",
            "replace",
            Model::Scale,
            Some((Model::Scale, true)),
            None,
        );
        add(
            &root,
            "/{name}/scale",
            "patch",
            "patch",
            "patch",
            Model::Scale,
            Some((Model::Patch, true)),
            None,
        );
    }
    out
}

/// A parameter as written in a document, with what identifies it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Param {
    pub name: String,
    /// `in`: `path`, `query` or `body`.
    pub location: String,
    pub json: Value,
}

/// kube-openapi's path building: a parameter (by name and location) that every
/// route of a path has, other than a body, moves to the path (the last
/// route's copy); both lists are sorted by name, then location.
pub(crate) fn hoist(per_route: Vec<Vec<Param>>) -> (Vec<Param>, Vec<Vec<Param>>) {
    let key = |p: &Param| (p.name.clone(), p.location.clone());
    let n = per_route.len();
    let mut common: Vec<Param> = Vec::new();
    if let Some(last) = per_route.last() {
        for p in last {
            if p.location != "body" && per_route.iter().all(|r| r.iter().any(|q| key(q) == key(p)))
            {
                common.push(p.clone());
            }
        }
    }
    let sort =
        |v: &mut Vec<Param>| v.sort_by(|a, b| (&a.name, &a.location).cmp(&(&b.name, &b.location)));
    sort(&mut common);
    let mut routes = Vec::with_capacity(n);
    for r in per_route {
        let mut own: Vec<Param> = r
            .into_iter()
            .filter(|p| !common.iter().any(|c| key(c) == key(p)))
            .collect();
        sort(&mut own);
        routes.push(own);
    }
    (common, routes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_ids_and_tags_like_kube_apiserver() {
        let cases = [
            (
                "listNamespacedGizmo",
                "/apis/testing.bindery.dev/v1/namespaces/{namespace}/gizmos",
                "listTestingBinderyDevV1NamespacedGizmo",
            ),
            (
                "deletecollectionGizmoClass",
                "/apis/testing.bindery.dev/v1/gizmoclasses",
                "deleteTestingBinderyDevV1CollectionGizmoClass",
            ),
            (
                "readNamespacedGizmoScale",
                "/apis/testing.bindery.dev/v1/namespaces/{namespace}/gizmos/{name}/scale",
                "readTestingBinderyDevV1NamespacedGizmoScale",
            ),
            (
                "createThing",
                "/apis/my-group.k8s.io/v2beta1/things",
                "createMyGroupV2beta1Thing",
            ),
            ("patch9Lives", "/apis/a.b/v1/x", "patchABV1Lives"),
        ];
        for (op, path, want) in cases {
            assert_eq!(operation_id_and_tag(op, path).0, want, "{op}");
        }
        assert_eq!(
            operation_id_and_tag("listX", "/apis/testing.bindery.dev/v1/x").1,
            "testingBinderyDev_v1"
        );
        assert_eq!(
            operation_id_and_tag("listX", "/apis/my-group.k8s.io/v1/x").1,
            "myGroup_v1"
        );
        // No verb: kube-apiserver fails; here the name is only sanitized.
        assert_eq!(operation_id_and_tag("", "").0, "");
    }

    #[test]
    fn descriptions_like_kube_apiserver() {
        assert_eq!(description("Gizmo", "", "create"), "create a Gizmo");
        assert_eq!(description("Item", "", "delete"), "delete an Item");
        assert_eq!(description("Gas", "", "create"), "create Gas");
        assert_eq!(description("Class", "", "create"), "create a Class");
        assert_eq!(description("", "", "create"), "create a ");
        assert_eq!(
            description("Gizmo", "status", "patch"),
            "partially update status of the specified Gizmo"
        );
        assert_eq!(
            description("Gizmo", "scale", "read"),
            "read scale of the specified Gizmo"
        );
        assert_eq!(
            description("Gizmo", "", "list"),
            "list objects of kind Gizmo"
        );
        assert_eq!(
            description("Gizmo", "", "deletecollection"),
            "delete collection of Gizmo"
        );
        assert_eq!(
            description("Gizmo", "x", "deletecollection"),
            "delete collection of x of a Gizmo"
        );
    }

    fn p(name: &str, location: &str, n: i64) -> Param {
        Param {
            name: name.into(),
            location: location.into(),
            json: n.into(),
        }
    }

    #[test]
    fn hoists_what_every_route_has_except_bodies() {
        let (common, own) = hoist(vec![
            vec![
                p("pretty", "query", 1),
                p("name", "path", 1),
                p("body", "body", 1),
                p("b", "query", 1),
            ],
            vec![
                p("name", "path", 2),
                p("pretty", "query", 2),
                p("body", "body", 2),
                p("a", "query", 2),
            ],
        ]);
        assert_eq!(common, [p("name", "path", 2), p("pretty", "query", 2)]);
        assert_eq!(
            own,
            [
                vec![p("b", "query", 1), p("body", "body", 1)],
                vec![p("a", "query", 2), p("body", "body", 2)]
            ]
        );
        let (common, own) = hoist(vec![vec![p("z", "query", 1), p("a", "query", 1)]]);
        assert_eq!(common, [p("a", "query", 1), p("z", "query", 1)]);
        assert_eq!(own, [Vec::<Param>::new()]);
        assert_eq!(hoist(Vec::new()), (Vec::new(), Vec::new()));
    }
}
