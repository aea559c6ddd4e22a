//! The whole read of a resource request, as bindery's router and proxy read
//! it: the request resolved (`resolved::Resolved`: path, query, verb), and
//! `ApiRequest::parse` of query, headers and body, by the custom-resource
//! and the built-in rules. Bad input is a client error, never a panic; the
//! one 5xx is kube-apiserver's own for a DELETE whose DeleteOptions body it
//! cannot decode (a 500 with no reason, as its handler answers any error
//! that is not a Status).

#![no_main]

use arbitrary::Arbitrary;
use bindery::forward::request::{ApiRequest, Incoming};
use bindery::route::{ApiPath, Endpoint, ResourceRequest, Verb};
use bindery::resolved::Resolved;
use bindery::wire::body::Rules;
use bindery::wire::query::{ListOptions, Query};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Input<'a> {
    method: u8,
    path: &'a str,
    query: Option<&'a str>,
    content_type: Option<&'a [u8]>,
    accept: Option<&'a [u8]>,
    headers: Vec<(&'a str, &'a [u8])>,
    body: &'a [u8],
    body_too_large: bool,
    built_in: bool,
}

const METHODS: &[&str] = &[
    "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE", "PROPFIND",
];

/// The resource the path names, or else a named object of a fixed one.
fn resource_of(path: &str) -> ResourceRequest {
    let named = match bindery::route::parse(path) {
        Endpoint::Consumer { path, .. }
        | Endpoint::Aggregated { path }
        | Endpoint::Workspace { path, .. } => match path {
            ApiPath::Resource(resource) => Some(resource),
            _ => None,
        },
        _ => None,
    };
    named.unwrap_or_else(|| ResourceRequest {
        group: "example.com".into(),
        version: "v1".into(),
        namespace: Some("team".into()),
        resource: "widgets".into(),
        name: Some("one".into()),
        subresource: None,
        watch_prefix: false,
    })
}

fuzz_target!(|input: Input<'_>| {
    let method =
        http::Method::from_bytes(METHODS[usize::from(input.method) % METHODS.len()].as_bytes())
            .expect("a method");
    let mut headers = http::HeaderMap::new();
    let named = [
        (http::header::CONTENT_TYPE, input.content_type),
        (http::header::ACCEPT, input.accept),
    ];
    for (name, value) in named {
        if let Some(Ok(value)) = value.map(http::HeaderValue::from_bytes) {
            headers.append(name, value);
        }
    }
    for (name, value) in &input.headers {
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(name.as_bytes()),
            http::HeaderValue::from_bytes(value),
        ) {
            headers.append(name, value);
        }
    }
    // The resolution the outermost layer makes, where the path and query
    // make a URI at all (hyper refuses the others before any layer).
    let uri = match input.query {
        Some(query) => format!("{}?{query}", input.path),
        None => input.path.to_string(),
    };
    if let Ok(uri) = uri.parse::<http::Uri>() {
        let _ = Resolved::of(&method, &uri);
    }
    let resource = resource_of(input.path);
    let query = Query::parse(input.query);
    let field_labels = ["spec.color".to_string()];
    let incoming = Incoming {
        method: &method,
        resource: &resource,
        query: &query,
        verb: Verb::of(&method, &resource, ListOptions::is_watch(&query)),
        headers: &headers,
        body: if input.body_too_large {
            &[]
        } else {
            input.body
        },
        kind: "Widget",
        body_too_large: input.body_too_large,
        field_labels: Some(&field_labels),
    };
    let rules = if input.built_in {
        Rules::BuiltIn
    } else {
        Rules::CustomResource
    };
    if let Err(error) = ApiRequest::parse_with(&incoming, rules) {
        let undecodable_delete_options =
            method == http::Method::DELETE && error.code == 500 && error.reason.is_empty();
        assert!(
            (400..500).contains(&error.code) || undecodable_delete_options,
            "bad input is a client error: {error:?}"
        );
    }
});
