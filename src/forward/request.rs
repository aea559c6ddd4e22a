//! A resource request read in full before anything is sent: its verb, the
//! options kube-apiserver would read for that verb, the representation the
//! caller negotiated, and its body, decoded. Each is read as kube-apiserver
//! reads it, in the order it checks them, so a bad request gets the error
//! kube-apiserver would give first. Pure.

use crate::route::{ResourceRequest, Verb};
use crate::status::ApiError;
use crate::wire::accept::{self, Output, Target};
use crate::wire::body::{self, ObjectMedia, PatchType, Rules};
use crate::wire::query::{
    self, DeleteOptions, GetOptions, ListOptions, Query, TableOptions, WriteOptions,
};
use crate::wire::restful;
use crate::wire::validate::{self, Write};
use serde_json::Value;

/// The options of a request, by verb.
#[derive(Clone, Debug, PartialEq)]
pub enum Options {
    Get(GetOptions),
    List(ListOptions),
    Create(WriteOptions),
    Update(WriteOptions),
    Patch(WriteOptions),
    /// The DeleteOptions the delete sends: the body's, else the query's.
    Delete(Value),
    DeleteCollection(ListOptions, Value),
}

/// A write's decoded body.
#[derive(Clone, Debug, PartialEq)]
pub enum Body {
    Object(Value),
    Patch(PatchType, Value),
    /// A built-in kind's object in protobuf, which bindery cannot decode
    /// (it knows no built-in kind's schema). It is never sent as a write:
    /// only a dry run of it, whose answer (the object it would make, in
    /// JSON) is what bindery reads, checks and sends.
    Protobuf(Vec<u8>),
}

/// A resource request, read.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiRequest {
    pub verb: Verb,
    pub options: Options,
    pub output: Output,
    /// Whether a JSON answer is indented.
    pub pretty: bool,
    /// The Table's options when a Table was negotiated. kube-apiserver
    /// reads them only once it has an answer, so a bad value is reported
    /// then, not before.
    pub table: Result<TableOptions, ApiError>,
    pub body: Option<Body>,
    /// A JSON or merge patch kube-apiserver cannot read: reported only once
    /// the object it patches is found (kube-apiserver decodes the patch
    /// against the object it has).
    pub patch_error: Option<ApiError>,
    /// The `timeout` parameter, checked, to send on.
    pub timeout: Option<String>,
    /// Warnings kube-apiserver would send with its answer (duplicate keys).
    pub warnings: Vec<String>,
}

/// What the request came with.
pub struct Incoming<'a> {
    pub method: &'a http::Method,
    pub resource: &'a ResourceRequest,
    /// The query and the verb, as the request was resolved
    /// ([`crate::resolved::Resolved`]).
    pub query: &'a Query,
    pub verb: Option<Verb>,
    pub headers: &'a http::HeaderMap,
    pub body: &'a [u8],
    /// The resource's kind, for messages about bodies.
    pub kind: &'a str,
    /// The body was larger than kube-apiserver reads (`body` is empty).
    pub body_too_large: bool,
    /// The field labels the resource has beyond `metadata.name` and
    /// `metadata.namespace` (a CRD's selectable fields), when known: a
    /// deletecollection's field selector is checked against them, where
    /// kube-apiserver converts its field labels.
    pub field_labels: Option<&'a [String]>,
}

impl ApiRequest {
    /// Reads `incoming`, a request for a custom resource, in the order
    /// kube-apiserver checks each verb's parts (its `create.go`,
    /// `update.go`, `patch.go`, `delete.go`, `get.go`). `None` for a method
    /// no resource serves.
    pub fn parse(incoming: &Incoming<'_>) -> Result<Option<Self>, ApiError> {
        Self::parse_with(incoming, Rules::CustomResource)
    }

    /// Reads `incoming` by `rules`: for a built-in kind, go-restful's route
    /// checks come before the handler's ([`crate::wire::restful`]), and its
    /// bodies are read as a built-in kind's ([`crate::wire::body`]). The
    /// checks only the kind's schema can make (its version, its fields)
    /// are the upstream's, made on what bindery encoded.
    pub fn parse_with(incoming: &Incoming<'_>, rules: Rules) -> Result<Option<Self>, ApiError> {
        let query = incoming.query;
        let Some(verb) = incoming.verb else {
            return Ok(None);
        };
        let timeout = deadline(verb, query)?;
        let reading = Reading::of(incoming, verb, rules)?;
        let read = reading.by_verb()?;
        let table = match read.output.target {
            Target::Table(_) => TableOptions::parse(query),
            _ => Ok(TableOptions::default()),
        };
        let user_agent = reading.header(http::header::USER_AGENT);
        let pretty =
            verb != Verb::Watch && (read.output.pretty || query::pretty(query, user_agent));
        Ok(Some(Self {
            verb,
            options: read.options,
            output: read.output,
            pretty,
            table,
            body: read.body,
            patch_error: read.patch_error,
            timeout,
            warnings: read.warnings,
        }))
    }

    /// The list options of a list, watch or deletecollection.
    pub fn list_options(&self) -> Option<&ListOptions> {
        match &self.options {
            Options::List(list) | Options::DeleteCollection(list, _) => Some(list),
            _ => None,
        }
    }
}

/// A request being read: what each verb's reading needs.
struct Reading<'r> {
    incoming: &'r Incoming<'r>,
    verb: Verb,
    rules: Rules,
    accept: Option<&'r str>,
    content_type: Option<&'r str>,
    /// The object a body must be, read by `body_rules`: the scale
    /// subresource's body is a Scale, a built-in kind, whose decoder
    /// defaults its kind from the URL and checks its version itself (the
    /// upstream's, on what bindery sends).
    expected: body::Expected<'r>,
    body_rules: Rules,
}

/// What a verb's reading gives.
struct ReadByVerb {
    options: Options,
    output: Output,
    body: Option<Body>,
    /// A patch kube-apiserver cannot read, refused once its object is found.
    patch_error: Option<ApiError>,
    warnings: Vec<String>,
}

impl<'r> Reading<'r> {
    /// Starts reading `incoming`, a request for `verb`, by `rules`: a
    /// built-in kind's go-restful route checks come first.
    fn of(incoming: &'r Incoming<'r>, verb: Verb, rules: Rules) -> Result<Self, ApiError> {
        let header = |name: http::header::HeaderName| {
            incoming.headers.get(name).and_then(|v| v.to_str().ok())
        };
        let accept = header(http::header::ACCEPT);
        let content_type = header(http::header::CONTENT_TYPE);
        if rules == Rules::BuiltIn {
            restful::check(verb, content_type, accept)?;
        }
        let scale = incoming.resource.subresource.as_deref() == Some("scale");
        let (expected, body_rules) = if scale {
            let scale = body::Expected {
                group: "autoscaling",
                version: "v1",
                kind: "Scale",
            };
            (scale, Rules::BuiltIn)
        } else {
            let own = body::Expected {
                group: &incoming.resource.group,
                version: &incoming.resource.version,
                kind: incoming.kind,
            };
            (own, rules)
        };
        Ok(Self {
            incoming,
            verb,
            rules,
            accept,
            content_type,
            expected,
            body_rules,
        })
    }

    fn header(&self, name: http::header::HeaderName) -> Option<&'r str> {
        self.incoming
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
    }

    /// The answer's representation.
    fn negotiate(&self) -> Result<Output, ApiError> {
        match self.verb {
            Verb::Watch => accept::watch_output(self.accept),
            _ => accept::output(self.accept),
        }
    }

    /// A body larger than kube-apiserver reads is found too large where
    /// its handler reads the body: after negotiating the answer's and the
    /// body's media types.
    fn read_whole(&self) -> Result<(), ApiError> {
        match self.incoming.body_too_large {
            true => Err(body::too_large()),
            false => Ok(()),
        }
    }

    /// The body as the object it must be, with the warnings of its read.
    fn object(
        &self,
        media: ObjectMedia,
        validation: query::FieldValidation,
    ) -> Result<(Body, Vec<String>), ApiError> {
        let body = self.incoming.body;
        match (media, self.rules) {
            (ObjectMedia::Protobuf, Rules::BuiltIn) => {
                Ok((Body::Protobuf(body.to_vec()), Vec::new()))
            }
            (ObjectMedia::Protobuf, rules) => {
                body::object(media, body, self.expected, validation, rules)
                    .map(|decoded| (Body::Object(decoded.value), decoded.warnings))
            }
            _ => body::object(media, body, self.expected, validation, self.body_rules)
                .map(|decoded| (Body::Object(decoded.value), decoded.warnings)),
        }
    }

    fn checks(&self) -> ObjectChecks<'r> {
        ObjectChecks {
            resource: self.incoming.resource,
            kind: self.expected.kind,
            rules: self.body_rules,
        }
    }

    /// The verb's parts, each read in the order kube-apiserver's handler
    /// for it reads them.
    fn by_verb(&self) -> Result<ReadByVerb, ApiError> {
        let query = self.incoming.query;
        let (options, output) = match self.verb {
            Verb::Create | Verb::Update | Verb::Patch => return self.write(),
            // Lists read and validate their query before they negotiate.
            Verb::List | Verb::Watch => {
                let options = ListOptions::parse(query)?;
                validate::list_options(&options)?;
                (Options::List(options), self.negotiate()?)
            }
            Verb::Get => {
                let output = self.negotiate()?;
                (Options::Get(GetOptions::parse(query)?), output)
            }
            Verb::Delete => {
                let output = self.negotiate()?;
                self.read_whole()?;
                let options = delete_options(query, self.content_type, self.incoming.body)?;
                validate::delete_options(&options)?;
                (Options::Delete(options), output)
            }
            Verb::DeleteCollection => {
                let output = self.negotiate()?;
                let list = ListOptions::parse(query)?;
                validate::list_options(&list)?;
                if let Some(supported) = self.incoming.field_labels {
                    validate::field_labels(&list.field_selector, supported)?;
                }
                self.read_whole()?;
                let delete = delete_options(query, self.content_type, self.incoming.body)?;
                validate::delete_options(&delete)?;
                (Options::DeleteCollection(list, delete), output)
            }
        };
        Ok(ReadByVerb {
            options,
            output,
            body: None,
            patch_error: None,
            warnings: Vec::new(),
        })
    }

    /// A create's, update's or patch's parts.
    fn write(&self) -> Result<ReadByVerb, ApiError> {
        let query = self.incoming.query;
        let mut patch_error = None;
        let (options, output, decoded) = match self.verb {
            Verb::Create => {
                let output = self.negotiate()?;
                let media = body::object_media(self.content_type)?;
                self.read_whole()?;
                let options = WriteOptions::parse(query, false);
                validate::write_options(&options, Write::Create)?;
                let (decoded, warned) = self.object(media, options.validation())?;
                self.checks().create(&decoded)?;
                (Options::Create(options), output, Some((decoded, warned)))
            }
            Verb::Update => {
                let output = self.negotiate()?;
                self.read_whole()?;
                let options = WriteOptions::parse(query, false);
                validate::write_options(&options, Write::Update)?;
                let media = body::object_media(self.content_type)?;
                let (decoded, warned) = self.object(media, options.validation())?;
                self.checks().update(&decoded)?;
                (Options::Update(options), output, Some((decoded, warned)))
            }
            _ => {
                // The patch's type is checked before anything else.
                let patch_type = PatchType::of(self.content_type, self.rules)?;
                let output = self.negotiate()?;
                self.read_whole()?;
                let options = WriteOptions::parse(query, true);
                validate::write_options(&options, Write::Patch(patch_type))?;
                let decoded =
                    match body::patch(patch_type, self.incoming.body, options.validation()) {
                        Ok(decoded) => {
                            Some((Body::Patch(patch_type, decoded.value), decoded.warnings))
                        }
                        Err(error) if patch_type != PatchType::Apply => {
                            patch_error = Some(error);
                            None
                        }
                        Err(error) => return Err(error),
                    };
                (Options::Patch(options), output, decoded)
            }
        };
        let (body, warnings) = match decoded {
            Some((body, warnings)) => (Some(body), warnings),
            None => (None, Vec::new()),
        };
        Ok(ReadByVerb {
            options,
            output,
            body,
            patch_error,
            warnings,
        })
    }
}

/// The `timeout` parameter, as kube-apiserver's request-deadline filter
/// reads it before anything else, for all but watches (long-running).
pub fn deadline(verb: Verb, query: &Query) -> Result<Option<String>, ApiError> {
    match verb {
        Verb::Watch => Ok(None),
        _ => query::timeout(query),
    }
}

/// The checks kube-apiserver makes of an object body against the request,
/// after decoding it: its group and version, its namespace, and (for an
/// update) its name.
struct ObjectChecks<'a> {
    resource: &'a ResourceRequest,
    kind: &'a str,
    rules: Rules,
}

impl ObjectChecks<'_> {
    /// A built-in kind's version is checked by its decoder, which knows
    /// the versions it has (the upstream's, on what bindery sends).
    fn api_version(&self, object: &Value, update: bool) -> Result<(), ApiError> {
        if self.rules == Rules::BuiltIn {
            return Ok(());
        }
        let expected = if self.resource.group.is_empty() {
            self.resource.version.clone()
        } else {
            format!("{}/{}", self.resource.group, self.resource.version)
        };
        let given = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if given == expected {
            return Ok(());
        }
        let _ = (update, self.kind);
        Err(ApiError::bad_request(format!(
            "the API version in the data ({given}) does not match the expected API version ({expected})"
        )))
    }

    /// `EnsureObjectNamespaceMatchesRequestNamespace`: a namespaced
    /// object's namespace is the request's, or empty.
    fn namespace(&self, object: &Value) -> Result<(), ApiError> {
        let given = object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default();
        match &self.resource.namespace {
            Some(namespace) if !given.is_empty() && given != namespace => {
                Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ))
            }
            _ => Ok(()),
        }
    }

    /// A protobuf body is checked by the upstream, which decodes it.
    fn create(&self, body: &Body) -> Result<(), ApiError> {
        let Body::Object(object) = body else {
            return Ok(());
        };
        self.api_version(object, false)?;
        self.namespace(object)
    }

    /// And `checkName`: the object's name is the URL's.
    fn update(&self, body: &Body) -> Result<(), ApiError> {
        let Body::Object(object) = body else {
            return Ok(());
        };
        self.api_version(object, true)?;
        self.namespace(object)?;
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let url = self.resource.name.as_deref().unwrap_or_default();
        // kube-apiserver's `checkName`: a name the namer cannot find, then
        // one that is not the URL's.
        if name.is_empty() {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({url} based on URL) was undeterminable: name must be provided"
            )));
        }
        if name != url {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({name}) does not match the name on the URL ({url})"
            )));
        }
        Ok(())
    }
}

/// A delete's options: its body's when it has one (which replaces the
/// query's entirely), else the query's.
fn delete_options(
    query: &Query,
    content_type: Option<&str>,
    body: &[u8],
) -> Result<Value, ApiError> {
    match body::delete_options(content_type, body)? {
        Some(options) => Ok(options),
        None => Ok(DeleteOptions::parse(query)?.to_json()),
    }
}

/// Requests read for tests elsewhere.
#[cfg(test)]
pub mod testing {
    use super::*;

    /// Reads a request for a Widget.
    pub fn parse(
        method: http::Method,
        resource: &ResourceRequest,
        query: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<ApiRequest, ApiError> {
        let widget = ("Widget", Rules::CustomResource);
        parse_as(widget, method, resource, query, headers, body)
    }

    /// Reads a request for a `kind` by `rules`.
    pub fn parse_as(
        (kind, rules): (&str, Rules),
        method: http::Method,
        resource: &ResourceRequest,
        query: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<ApiRequest, ApiError> {
        let mut map = http::HeaderMap::new();
        for (k, v) in headers {
            map.insert(
                http::header::HeaderName::from_bytes(k.as_bytes()).expect("a header name"),
                v.parse().expect("a header value"),
            );
        }
        let query = Query::parse(Some(query));
        let incoming = Incoming {
            method: &method,
            resource,
            query: &query,
            verb: Verb::of(&method, resource, ListOptions::is_watch(&query)),
            headers: &map,
            body,
            kind,
            body_too_large: false,
            field_labels: None,
        };
        ApiRequest::parse_with(&incoming, rules).map(|r| r.expect("a served method"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::accept::{Media, MetaVersion};
    use proptest::prelude::*;
    use serde_json::json;

    /// A query of known and unknown keys with any values, encoded as a
    /// client encodes them (or not at all).
    fn any_query() -> impl Strategy<Value = String> {
        let key = prop::sample::select(vec![
            "watch",
            "resourceVersion",
            "resourceVersionMatch",
            "labelSelector",
            "fieldSelector",
            "limit",
            "continue",
            "timeout",
            "timeoutSeconds",
            "allowWatchBookmarks",
            "sendInitialEvents",
            "dryRun",
            "fieldManager",
            "fieldValidation",
            "force",
            "pretty",
            "includeObject",
            "propagationPolicy",
            "gracePeriodSeconds",
            "orphanDependents",
            "x",
        ]);
        prop::collection::vec((key, "[ -~]{0,16}", any::<bool>()), 0..6).prop_map(|pairs| {
            pairs
                .iter()
                .map(|(k, v, encoded)| match encoded {
                    true => form_urlencoded::Serializer::new(String::new())
                        .append_pair(k, v)
                        .finish(),
                    false => format!("{k}={v}"),
                })
                .collect::<Vec<_>>()
                .join("&")
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]
        /// Whatever a caller sends (any method, query, media types and
        /// body), the request is read or refused without a panic, and a
        /// refusal is a Status with an error code and a reason; or, as
        /// kube-apiserver answers a body its decoder cannot read at all (a
        /// deletecollection's, say), a 500 with its unknown (empty) reason.
        #[test]
        fn any_request_is_read_or_refused(
            method in prop::sample::select(vec!["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]),
            named in any::<bool>(),
            query in any_query(),
            content_type in prop::sample::select(vec![
                "application/json", "application/yaml", "application/merge-patch+json",
                "application/json-patch+json", "application/apply-patch+yaml",
                "application/strategic-merge-patch+json", "application/vnd.kubernetes.protobuf",
                "text/plain", "application/json; charset=utf-16", "",
            ]),
            accept in prop::sample::select(vec![
                "application/json", "application/json;as=Table;v=v1;g=meta.k8s.io",
                "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
                "application/yaml", "*/*", "application/vnd.kubernetes.protobuf", "text/html", "",
            ]),
            body in prop_oneof![
                prop::collection::vec(any::<u8>(), 0..64),
                Just(br#"{"apiVersion":"g/v1","kind":"Widget","metadata":{"name":"w"}}"#.to_vec()),
                Just(br#"[{"op":"replace","path":"/spec","value":1}]"#.to_vec()),
                Just(b"apiVersion: g/v1\nkind: Widget\nmetadata: {name: w}\n".to_vec()),
            ],
        ) {
            let method = http::Method::from_bytes(method.as_bytes()).unwrap();
            let mut headers = http::HeaderMap::new();
            if !content_type.is_empty() {
                headers.insert(http::header::CONTENT_TYPE, content_type.parse().unwrap());
            }
            if !accept.is_empty() {
                headers.insert(http::header::ACCEPT, accept.parse().unwrap());
            }
            let resource = resource(named.then_some("w"));
            let query = Query::parse(Some(&query));
            let incoming = Incoming {
                method: &method,
                resource: &resource,
                query: &query,
                verb: Verb::of(&method, &resource, ListOptions::is_watch(&query)),
                headers: &headers,
                body: &body,
                kind: "Widget",
                body_too_large: false,
                field_labels: None,
            };
            if let Err(refused) = ApiRequest::parse_with(&incoming, Rules::CustomResource) {
                prop_assert!((400..600).contains(&refused.code), "{refused:?}");
                prop_assert!(!refused.reason.is_empty() || refused.code == 500, "{refused:?}");
            }
        }
    }

    fn resource(name: Option<&str>) -> ResourceRequest {
        ResourceRequest {
            group: "g".into(),
            version: "v1".into(),
            namespace: Some("ns".into()),
            resource: "widgets".into(),
            name: name.map(str::to_string),
            subresource: None,
            watch_prefix: false,
        }
    }

    fn parse(
        method: http::Method,
        name: Option<&str>,
        query: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<ApiRequest, ApiError> {
        testing::parse(method, &resource(name), query, headers, body)
    }

    /// A request whose body was too large, read as the router hands it on.
    fn too_large(
        method: http::Method,
        name: Option<&str>,
        headers: &[(&str, &str)],
    ) -> Result<Option<ApiRequest>, ApiError> {
        let map: http::HeaderMap = headers
            .iter()
            .map(|(k, v)| {
                (
                    http::header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                    v.parse().unwrap(),
                )
            })
            .collect();
        let resource = resource(name);
        ApiRequest::parse(&Incoming {
            method: &method,
            resource: &resource,
            query: &Query::default(),
            verb: Verb::of(&method, &resource, false),
            headers: &map,
            body: &[],
            kind: "Widget",
            body_too_large: true,
            field_labels: None,
        })
    }

    #[test]
    fn a_body_too_large_is_found_where_kube_apiserver_reads_it() {
        let json = ("content-type", "application/json");
        // After the answer's media type (406) and the body's (415).
        let error =
            too_large(http::Method::POST, None, &[json, ("accept", "text/html")]).unwrap_err();
        assert_eq!(error.code, 406);
        let error =
            too_large(http::Method::POST, None, &[("content-type", "text/plain")]).unwrap_err();
        assert_eq!(error.code, 415);
        for (method, name, content_type) in [
            (http::Method::POST, None, "application/json"),
            (http::Method::PUT, Some("w"), "application/json"),
            (
                http::Method::PATCH,
                Some("w"),
                "application/merge-patch+json",
            ),
            (http::Method::DELETE, Some("w"), "application/json"),
        ] {
            let error =
                too_large(method.clone(), name, &[("content-type", content_type)]).unwrap_err();
            assert_eq!(
                (error.code, error.message.as_str()),
                (413, "Request entity too large: limit is 3145728"),
                "{method}"
            );
        }
        // An update or a patch reads its body before its options and its
        // body's media type; a patch's type is checked first of all.
        let error = too_large(
            http::Method::PUT,
            Some("w"),
            &[("content-type", "text/plain")],
        )
        .unwrap_err();
        assert_eq!(error.code, 413);
        let error = too_large(
            http::Method::PATCH,
            Some("w"),
            &[("content-type", "text/plain")],
        )
        .unwrap_err();
        assert_eq!(error.code, 415);
        // A read reads no body.
        assert!(
            too_large(http::Method::GET, Some("w"), &[])
                .unwrap()
                .is_some()
        );
    }

    #[test]
    fn a_list_reads_its_query_before_it_negotiates() {
        let error = parse(
            http::Method::GET,
            None,
            "limit=x",
            &[("accept", "text/html")],
            b"",
        )
        .unwrap_err();
        assert_eq!(error.code, 400);
        let error = parse(
            http::Method::GET,
            Some("w"),
            "export=1",
            &[("accept", "text/html")],
            b"",
        )
        .unwrap_err();
        assert_eq!(error.code, 406, "a get negotiates first");
    }

    #[test]
    fn a_patch_checks_its_type_first() {
        let error = parse(
            http::Method::PATCH,
            Some("w"),
            "",
            &[
                ("accept", "text/html"),
                ("content-type", "application/strategic-merge-patch+json"),
            ],
            b"{}",
        )
        .unwrap_err();
        assert_eq!(error.code, 415);
    }

    #[test]
    fn a_watch_of_metadata_in_protobuf_is_read() {
        let request = parse(
            http::Method::GET,
            None,
            "watch=yes&resourceVersion=0",
            &[(
                "accept",
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
            )],
            b"",
        )
        .unwrap();
        assert_eq!(request.verb, Verb::Watch);
        assert_eq!(request.output.media, Media::Protobuf);
        assert_eq!(
            request.output.target,
            Target::PartialObjectMetadata(MetaVersion::V1)
        );
        assert!(!request.pretty);
    }

    #[test]
    fn a_bad_include_object_waits_for_the_answer() {
        let request = parse(
            http::Method::GET,
            None,
            "includeObject=Everything",
            &[("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")],
            b"",
        )
        .unwrap();
        assert_eq!(request.table.unwrap_err().code, 400);
    }

    #[test]
    fn a_delete_sends_its_bodys_options_else_its_querys() {
        let request = parse(
            http::Method::DELETE,
            Some("w"),
            "gracePeriodSeconds=5",
            &[],
            br#"{"kind":"DeleteOptions","propagationPolicy":"Orphan"}"#,
        )
        .unwrap();
        assert_eq!(
            request.options,
            Options::Delete(
                json!({"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1",
                "propagationPolicy": "Orphan"})
            )
        );
        let request = parse(
            http::Method::DELETE,
            Some("w"),
            "gracePeriodSeconds=5",
            &[],
            b"",
        )
        .unwrap();
        assert_eq!(
            request.options,
            Options::Delete(
                json!({"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1",
                "gracePeriodSeconds": 5})
            )
        );
    }

    #[test]
    fn a_create_decodes_its_body_as_go_does() {
        let request = parse(
            http::Method::POST,
            None,
            "",
            &[("content-type", "application/json")],
            b"{\"apiVersion\":\"g/v1\",\"kind\":\"Widget\",\"metadata\":{\"annotations\":{\"a\":\"\\ud800\"}}}",
        )
        .unwrap();
        let Some(Body::Object(object)) = request.body else {
            panic!("an object body");
        };
        assert_eq!(object["metadata"]["annotations"]["a"], "\u{fffd}");
    }

    /// A ConfigMap request, read by a built-in kind's rules.
    fn built_in(
        method: http::Method,
        name: Option<&str>,
        query: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<ApiRequest, ApiError> {
        let resource = ResourceRequest {
            group: String::new(),
            resource: "configmaps".into(),
            ..resource(name)
        };
        let config_map = ("ConfigMap", Rules::BuiltIn);
        testing::parse_as(config_map, method, &resource, query, headers, body)
    }

    #[test]
    fn a_built_in_kind_is_routed_by_go_restful_before_its_handler_reads_it() {
        // On a custom resource the list's query is read first.
        let error = built_in(
            http::Method::GET,
            None,
            "limit=x",
            &[("accept", "text/html")],
            b"",
        )
        .unwrap_err();
        assert_eq!(
            (error.code, error.details),
            (406, Some(json!({}))),
            "{}",
            error.message
        );
        let error = built_in(
            http::Method::PATCH,
            Some("c"),
            "",
            &[("content-type", "text/plain"), ("accept", "text/html")],
            b"{}",
        )
        .unwrap_err();
        assert_eq!(error.message, "415: Unsupported Media Type");
        let error = built_in(http::Method::PATCH, Some("c"), "timeout=x", &[], b"{}").unwrap_err();
        assert_eq!(error.code, 400, "the deadline comes first");
    }

    #[test]
    fn a_built_in_kind_takes_protobuf_objects_undecoded_and_strategic_merge_patches() {
        let protobuf = b"k8s\0\n\x0f\n\x02v1\x12\tConfigMap";
        let request = built_in(
            http::Method::POST,
            None,
            "",
            &[("content-type", "application/vnd.kubernetes.protobuf")],
            protobuf,
        )
        .unwrap();
        assert_eq!(request.body, Some(Body::Protobuf(protobuf.to_vec())));
        let request = built_in(
            http::Method::PUT,
            Some("c"),
            "",
            &[("content-type", "application/json")],
            br#"{"metadata":{"name":"c"}}"#,
        )
        .unwrap();
        assert_eq!(
            request.body,
            Some(Body::Object(json!({"metadata": {"name": "c"}}))),
            "the kind and version are the URL's"
        );
        assert_eq!(
            built_in(
                http::Method::PUT,
                Some("c"),
                "",
                &[],
                br#"{"metadata":{"name":"other"}}"#
            )
            .unwrap_err()
            .message,
            "the name of the object (other) does not match the name on the URL (c)"
        );
        let smp = [("content-type", "application/strategic-merge-patch+json")];
        let request =
            built_in(http::Method::PATCH, Some("c"), "", &smp, br#"{"data":{}}"#).unwrap();
        assert_eq!(
            request.body,
            Some(Body::Patch(PatchType::StrategicMerge, json!({"data": {}})))
        );
        let error = parse(http::Method::PATCH, Some("w"), "", &smp, b"{}").unwrap_err();
        assert_eq!(error.code, 415, "a custom resource takes none");
        let error = parse(
            http::Method::POST,
            None,
            "",
            &[("content-type", "application/vnd.kubernetes.protobuf")],
            protobuf,
        )
        .unwrap_err();
        assert_eq!(error.code, 415, "nor protobuf");
    }

    #[test]
    fn curl_gets_pretty_json() {
        let request = parse(
            http::Method::GET,
            Some("w"),
            "",
            &[("user-agent", "curl/8.5")],
            b"",
        )
        .unwrap();
        assert!(request.pretty);
    }
}
