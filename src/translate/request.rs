//! A consumer's resource request, read (`forward::request::ApiRequest`),
//! into the provider request bindery sends: its method, path, the options
//! it parsed encoded again (selectors, continue tokens and namespaces in
//! provider terms), the representation to ask for (always JSON, which
//! bindery translates), and a body bindery encoded. Nothing of the
//! consumer's request is passed on as it came. Pure.

use super::binding::BoundResource;
use super::continue_token::{ContinueTokens, TokenError};
use super::fields;
use super::objects::{Refusal, object_down};
use crate::forward::request::{ApiRequest, Body, Options};
use crate::route::{ResourceRequest, Verb};
use crate::wire::accept::{MetaVersion, Target};
use crate::wire::body::PatchType;
use crate::wire::query::{IncludeObject, ListOptions, Pairs};
use serde_json::Value;

/// The request bindery sends to the provider.
#[derive(Clone, Debug, PartialEq)]
pub struct ProviderRequest {
    pub method: http::Method,
    /// The resource it is for, in provider terms: the watch cache is keyed
    /// by it, and its path is made from it.
    pub target: ResourceRequest,
    /// Query pairs, not yet encoded.
    pub query: Pairs,
    /// The Accept header: JSON, in the shape the caller negotiated.
    pub accept: String,
    /// The body and its content type.
    pub body: Option<(&'static str, Vec<u8>)>,
}

impl ProviderRequest {
    /// The path with its query.
    pub fn uri(&self) -> String {
        let path = self.target.path();
        if self.query.is_empty() {
            return path;
        }
        let query = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(&self.query)
            .finish();
        format!("{path}?{query}")
    }
}

/// Why a request cannot be translated.
#[derive(Debug, PartialEq, Eq)]
pub enum RequestError {
    Refused(Refusal),
    Continue(TokenError),
    /// A body bindery did not decode (a built-in kind's protobuf), which
    /// it never sends.
    Undecoded,
}

impl From<Refusal> for RequestError {
    fn from(refusal: Refusal) -> Self {
        RequestError::Refused(refusal)
    }
}

/// The scope a continue token is bound to.
pub fn token_scope(bound: &BoundResource, request: &ResourceRequest) -> String {
    format!(
        "{}/{}/{}",
        bound.consumer,
        bound.qualified_resource(),
        request.namespace.as_deref().unwrap_or("")
    )
}

/// The upstream's Accept for what the caller negotiated: the same shape,
/// in JSON, which bindery reads and translates. The shape is the caller's
/// exactly, so that kube-apiserver answers a mismatch (metadata of one
/// object asked of a list, say) with its own 406, after its own lookup.
pub fn upstream_accept(target: Target) -> String {
    let meta = |kind: &str, version: MetaVersion| {
        let version = match version {
            MetaVersion::V1 => "v1",
            MetaVersion::V1beta1 => "v1beta1",
        };
        format!("application/json;as={kind};v={version};g=meta.k8s.io")
    };
    match target {
        Target::Resource => "application/json".into(),
        Target::Table(version) => meta("Table", version),
        Target::PartialObjectMetadata(version) => meta("PartialObjectMetadata", version),
        Target::PartialObjectMetadataList(version) => meta("PartialObjectMetadataList", version),
    }
}

/// Translates a read request's (and a delete's, and a create's or update's)
/// request. A patch is first made into the object it results in
/// (`proxy::patch`), then sent as the update of that object. A created or
/// updated object keeps the references of `stored` that are the provider's
/// own (`owners::keep_providers_own`): the stored object's, for an update.
pub fn request_down(
    bound: &BoundResource,
    resource: &ResourceRequest,
    request: &ApiRequest,
    tokens: &ContinueTokens,
    stored: Option<&Value>,
) -> Result<ProviderRequest, RequestError> {
    let target = provider_target(bound, resource);
    let mut query = Pairs::new();
    let mut method = match request.verb {
        Verb::Get | Verb::List | Verb::Watch => http::Method::GET,
        Verb::Create => http::Method::POST,
        Verb::Update => http::Method::PUT,
        Verb::Patch => http::Method::PATCH,
        Verb::Delete | Verb::DeleteCollection => http::Method::DELETE,
    };
    let mut body = None;
    match &request.options {
        Options::Get(options) => options.encode(&mut query),
        Options::List(options) => {
            list_down(bound, resource, request.verb, options, tokens)?.encode(&mut query);
        }
        Options::Create(options) | Options::Update(options) | Options::Patch(options) => {
            options.encode(&mut query);
        }
        Options::Delete(options) => body = Some(json_body(options)),
        Options::DeleteCollection(options, delete) => {
            list_down(bound, resource, request.verb, options, tokens)?.encode(&mut query);
            body = Some(json_body(delete));
        }
    }
    query.extend(include_object(request));
    if let Some(timeout) = &request.timeout {
        query.push(("timeout".into(), timeout.clone()));
    }
    let with_labels = resource.subresource.as_deref() != Some("scale");
    match &request.body {
        Some(Body::Object(object)) => {
            let mut object = object.clone();
            object_down(
                bound,
                resource.namespace.as_deref(),
                &mut object,
                with_labels,
            )?;
            if with_labels {
                keep_stored_references(bound, stored, &mut object);
            }
            body = Some(json_body(&object));
        }
        Some(Body::Patch(PatchType::Apply, config)) => {
            let mut config = config.clone();
            object_down(
                bound,
                resource.namespace.as_deref(),
                &mut config,
                with_labels,
            )?;
            let bytes = serde_json::to_vec(&config).expect("a JSON value serializes");
            body = Some((PatchType::Apply.content_type(), bytes));
        }
        Some(Body::Patch(_, _)) => {
            // Applied by bindery and sent as the update of its result.
            method = http::Method::PUT;
        }
        Some(Body::Protobuf(_)) => return Err(RequestError::Undecoded),
        None => {}
    }
    Ok(ProviderRequest {
        method,
        target,
        query,
        accept: upstream_accept(request.output.target),
        body,
    })
}

/// What a Table's rows carry, asked of the upstream: rows are checked by
/// their objects, so always at least their metadata.
pub fn include_object(request: &ApiRequest) -> Option<(String, String)> {
    let Target::Table(_) = request.output.target else {
        return None;
    };
    let include = match request.table.as_ref().map(|t| t.include_object) {
        Ok(IncludeObject::Object) => "Object",
        _ => "Metadata",
    };
    Some(("includeObject".into(), include.into()))
}

/// A list's options in provider terms: its selectors mapped (and across
/// namespaces, or to delete, narrowed to the export's identity), its
/// continue token opened.
fn list_down(
    bound: &BoundResource,
    resource: &ResourceRequest,
    verb: Verb,
    options: &ListOptions,
    tokens: &ContinueTokens,
) -> Result<ListOptions, RequestError> {
    let mut out = options.clone();
    // Lists and watches across namespaces are narrowed to the export by
    // label; within one namespace (the consumer's alone) every object's
    // identity is checked on the way back instead, which keeps
    // kube-apiserver's `remainingItemCount` (it is not given for
    // label-selected lists). A deletecollection is always narrowed: it
    // must never touch another's object.
    let narrowed = resource.namespace.is_none() || verb == Verb::DeleteCollection;
    if narrowed {
        let caller = Some(options.label_selector.as_str()).filter(|s| !s.is_empty());
        out.label_selector = fields::label_selector(bound, caller);
    }
    if !options.field_selector.is_empty() {
        out.field_selector = fields::field_selector(bound, &options.field_selector);
    }
    if !options.continue_token.is_empty() {
        out.continue_token = tokens
            .open(&token_scope(bound, resource), &options.continue_token)
            .map_err(RequestError::Continue)?;
    }
    Ok(out)
}

/// The update that stores `object` (a patch's result, in consumer terms),
/// in provider terms.
pub fn update_down(
    bound: &BoundResource,
    resource: &ResourceRequest,
    object: &mut Value,
    current: &Value,
) -> Result<(&'static str, Vec<u8>), Refusal> {
    let with_labels = resource.subresource.as_deref() != Some("scale");
    object_down(bound, resource.namespace.as_deref(), object, with_labels)?;
    if with_labels {
        keep_stored_references(bound, Some(current), object);
    }
    Ok(json_body(object))
}

/// A write keeps the references the provider stored that its consumer
/// never saw (`owners::keep_providers_own`).
fn keep_stored_references(bound: &BoundResource, stored: Option<&Value>, object: &mut Value) {
    let stored = stored
        .and_then(|s| s.get("metadata"))
        .and_then(Value::as_object);
    let metadata = object.get_mut("metadata").and_then(Value::as_object_mut);
    if let (Some(stored), Some(metadata)) = (stored, metadata) {
        super::owners::keep_providers_own(&bound.provider_kinds, stored, metadata);
    }
}

fn json_body(value: &Value) -> (&'static str, Vec<u8>) {
    (
        "application/json",
        serde_json::to_vec(value).expect("a JSON value serializes"),
    )
}

/// The resource a consumer's resource request is for, in provider terms:
/// its namespace the consumer's provider namespace (a cluster-scoped
/// object's under `Namespaced` isolation), its name the provider's.
pub fn provider_target(bound: &BoundResource, request: &ResourceRequest) -> ResourceRequest {
    let namespace = match &request.namespace {
        Some(namespace) => Some(bound.namespaces.to_provider(namespace)),
        None => bound
            .provider_namespace_of_cluster_scoped()
            .map(str::to_string),
    };
    ResourceRequest {
        group: request.group.clone(),
        version: request.version.clone(),
        namespace,
        resource: request.resource.clone(),
        name: request.name.as_ref().map(|name| bound.provider_name(name)),
        subresource: request.subresource.clone(),
        watch_prefix: request.watch_prefix,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forward::request::testing;
    use crate::route::{ApiPath, Endpoint, parse};
    use crate::translate::binding::fixtures::widgets;

    fn resource(path: &str) -> ResourceRequest {
        match parse(path) {
            Endpoint::Consumer {
                path: ApiPath::Resource(r),
                ..
            } => r,
            other => panic!("{other:?}"),
        }
    }

    fn down(
        method: http::Method,
        path: &str,
        query: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        tokens: &ContinueTokens,
    ) -> Result<ProviderRequest, RequestError> {
        let resource = resource(path);
        let request = testing::parse(method, &resource, query, headers, body).unwrap();
        request_down(&widgets(), &resource, &request, tokens, None)
    }

    fn pairs(raw: &[(&str, &str)]) -> Pairs {
        raw.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    const NS: &str = "/clusters/c1/apis/example.com/v1/namespaces/ns/widgets";
    const ALL: &str = "/clusters/c1/apis/example.com/v1/widgets";

    #[test]
    fn namespaced_isolation_sends_cluster_scoped_requests_to_the_cluster_namespace() {
        use crate::translate::Isolation;
        let g = BoundResource {
            isolation: Isolation::Namespaced,
            ..crate::translate::binding::fixtures::gadgets()
        };
        let request = |name: Option<&str>| ResourceRequest {
            group: "example.com".into(),
            version: "v1".into(),
            namespace: None,
            resource: "gadgets".into(),
            name: name.map(str::to_string),
            subresource: None,
            watch_prefix: false,
        };
        assert_eq!(
            provider_target(&g, &request(Some("g"))).path(),
            "/apis/example.com/v1/namespaces/kube-bind-c1/gadgets/g"
        );
        assert_eq!(
            provider_target(&g, &request(None)).path(),
            "/apis/example.com/v1/namespaces/kube-bind-c1/gadgets"
        );
    }

    #[test]
    fn lists_are_mapped_and_narrowed_across_namespaces() {
        let tokens = ContinueTokens::random();
        let w = widgets();
        let out = down(
            http::Method::GET,
            NS,
            "limit=2&fieldSelector=metadata.namespace%3Dns&bogus=1",
            &[],
            b"",
            &tokens,
        )
        .unwrap();
        assert_eq!(
            out.target.path(),
            "/apis/example.com/v1/namespaces/kube-bind-c1-ns/widgets"
        );
        assert_eq!(
            out.query,
            pairs(&[
                ("fieldSelector", "metadata.namespace=kube-bind-c1-ns"),
                ("limit", "2")
            ]),
            "in one namespace objects are checked one by one; unknown parameters are dropped"
        );
        assert_eq!(out.accept, "application/json");
        for query in ["labelSelector=a%3Db", "labelSelector=a%3Db&watch=yes"] {
            let out = down(http::Method::GET, ALL, query, &[], b"", &tokens).unwrap();
            assert_eq!(out.target.path(), "/apis/example.com/v1/widgets");
            assert_eq!(
                out.query[0],
                (
                    "labelSelector".to_string(),
                    format!("a=b,{}", w.identity_selector())
                )
            );
        }
        let out = down(http::Method::DELETE, NS, "", &[], b"", &tokens).unwrap();
        assert_eq!(
            out.query,
            pairs(&[("labelSelector", &w.identity_selector())])
        );
        assert!(
            out.body.is_some(),
            "a deletecollection sends its options as a body"
        );
    }

    #[test]
    fn watches_are_canonical() {
        let out = down(
            http::Method::GET,
            NS,
            "watch&resourceVersion=0&allowWatchBookmarks=1",
            &[],
            b"",
            &ContinueTokens::random(),
        )
        .unwrap();
        assert_eq!(
            out.query,
            pairs(&[
                ("watch", "true"),
                ("allowWatchBookmarks", "true"),
                ("resourceVersion", "0")
            ])
        );
    }

    #[test]
    fn continue_tokens_are_opened_for_their_scope_only() {
        let w = widgets();
        let tokens = ContinueTokens::random();
        let sealed = tokens.seal(&token_scope(&w, &resource(NS)), "upstream");
        let query = format!("continue={sealed}");
        let out = down(http::Method::GET, NS, &query, &[], b"", &tokens).unwrap();
        assert!(out.query.contains(&("continue".into(), "upstream".into())));
        let other = "/clusters/c1/apis/example.com/v1/namespaces/other/widgets";
        assert_eq!(
            down(http::Method::GET, other, &query, &[], b"", &tokens),
            Err(RequestError::Continue(TokenError::Forged))
        );
    }

    #[test]
    fn tables_always_ask_for_objects() {
        let table = "application/json;as=Table;v=v1;g=meta.k8s.io";
        for (query, include) in [
            ("includeObject=None", "Metadata"),
            ("", "Metadata"),
            ("includeObject=Object", "Object"),
        ] {
            let out = down(
                http::Method::GET,
                NS,
                query,
                &[("accept", table)],
                b"",
                &ContinueTokens::random(),
            )
            .unwrap();
            assert_eq!(out.accept, table);
            assert_eq!(out.query, pairs(&[("includeObject", include)]), "{query}");
        }
        let metadata =
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
        let out = down(
            http::Method::GET,
            NS,
            "",
            &[("accept", metadata)],
            b"",
            &ContinueTokens::random(),
        )
        .unwrap();
        assert_eq!(
            out.accept, "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
            "metadata is asked for in JSON, translated, then encoded"
        );
    }

    #[test]
    fn bodies_are_bindery_encoded() {
        let body = b"{\"apiVersion\":\"example.com/v1\",\"kind\":\"Widget\",\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\",\"annotations\":{\"x\":\"\\ud800\"}}}";
        let out = down(
            http::Method::POST,
            NS,
            "dryRun=All&fieldManager=me&unknown=1",
            &[("content-type", "application/json")],
            body,
            &ContinueTokens::random(),
        )
        .unwrap();
        let (content_type, bytes) = out.body.unwrap();
        assert_eq!(content_type, "application/json");
        let value: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(value["metadata"]["namespace"], "kube-bind-c1-ns");
        assert_eq!(value["metadata"]["labels"]["bindery.dev/consumer"], "c1");
        assert_eq!(value["metadata"]["annotations"]["x"], "\u{fffd}");
        assert_eq!(
            out.query,
            pairs(&[("dryRun", "All"), ("fieldManager", "me")])
        );

        let forged = br#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"a","labels":{"bindery.dev/export":"x"}}}"#;
        assert!(matches!(
            down(
                http::Method::POST,
                NS,
                "",
                &[],
                forged,
                &ContinueTokens::random()
            ),
            Err(RequestError::Refused(Refusal::ReservedLabel { .. }))
        ));

        let yaml = b"apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: a\n";
        let out = down(
            http::Method::PATCH,
            &format!("{NS}/a"),
            "fieldManager=me",
            &[("content-type", "application/apply-patch+yaml")],
            yaml,
            &ContinueTokens::random(),
        )
        .unwrap();
        let (content_type, bytes) = out.body.unwrap();
        assert_eq!(content_type, "application/apply-patch+yaml");
        let value: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(value["metadata"]["labels"]["bindery.dev/consumer"], "c1");
    }
}
