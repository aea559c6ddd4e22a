//! A consumer's resource request into a provider request: path, query and body.

use super::binding::BoundResource;
use super::continue_token::{ContinueTokens, TokenError};
use super::fields;
use super::objects::{Refusal, object_down};
use super::patch::{json_patch_down, merge_patch_down};
use crate::route::{ResourceRequest, Verb};
use serde_json::{Map, Value};

/// The request bindery sends to the provider.
#[derive(Debug, PartialEq)]
pub struct ProviderRequest {
    /// Path, percent-encoded.
    pub path: String,
    /// Query pairs, not yet encoded.
    pub query: Vec<(String, String)>,
    /// A rewritten body and its content type; `None` sends the consumer's unchanged.
    pub body: Option<(String, Vec<u8>)>,
}

/// Why a request cannot be translated.
#[derive(Debug, PartialEq, Eq)]
pub enum RequestError {
    Refused(Refusal),
    Continue(TokenError),
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

/// A consumer's resource request, as far as translation needs it.
pub struct ConsumerRequest<'a> {
    pub resource: &'a ResourceRequest,
    pub verb: Verb,
    /// Decoded query pairs.
    pub query: &'a [(String, String)],
    pub content_type: Option<&'a str>,
    pub body: &'a [u8],
    /// The target's current labels, for writes to a named object.
    pub current_labels: Option<&'a Map<String, Value>>,
}

/// Translates the consumer's request.
pub fn request_down(
    bound: &BoundResource,
    incoming: &ConsumerRequest<'_>,
    tokens: &ContinueTokens,
) -> Result<ProviderRequest, RequestError> {
    let ConsumerRequest {
        resource: request,
        verb,
        query,
        content_type,
        body,
        current_labels,
    } = *incoming;
    let path = provider_path(bound, request);
    // Lists and watches across namespaces are narrowed to the export by label;
    // within one namespace (the consumer's alone) every object's identity is
    // checked on the way back instead, which keeps kube-apiserver's
    // `remainingItemCount` (it is not given for label-selected lists).
    // A deletecollection is always narrowed: it must never touch another's object.
    let collection = match verb {
        Verb::List | Verb::Watch => request.namespace.is_none(),
        Verb::DeleteCollection => true,
        _ => false,
    };
    let mut out_query = Vec::with_capacity(query.len() + 1);
    let mut saw_label_selector = false;
    for (key, value) in query {
        let value = match key.as_str() {
            "labelSelector" if collection => {
                saw_label_selector = true;
                fields::label_selector(bound, Some(value))
            }
            "fieldSelector" => fields::field_selector(bound, value),
            "continue" if !value.is_empty() => tokens
                .open(&token_scope(bound, request), value)
                .map_err(RequestError::Continue)?,
            _ => value.clone(),
        };
        out_query.push((key.clone(), value));
    }
    if collection && !saw_label_selector {
        out_query.push(("labelSelector".into(), fields::label_selector(bound, None)));
    }
    let body = match verb {
        Verb::Create | Verb::Update | Verb::Patch => {
            body_down(bound, request, content_type, body, current_labels)?
        }
        _ => None,
    };
    Ok(ProviderRequest {
        path,
        query: out_query,
        body,
    })
}

fn provider_path(bound: &BoundResource, request: &ResourceRequest) -> String {
    let mut path = format!(
        "/apis/{}/{}",
        encode(&request.group),
        encode(&request.version)
    );
    if request.watch_prefix {
        path.push_str("/watch");
    }
    if let Some(ns) = &request.namespace {
        path.push_str("/namespaces/");
        path.push_str(&encode(&bound.namespaces.to_provider(ns)));
    }
    path.push('/');
    path.push_str(&encode(&request.resource));
    if let Some(name) = &request.name {
        path.push('/');
        path.push_str(&encode(&bound.provider_name(name)));
    }
    if let Some(subresource) = &request.subresource {
        path.push('/');
        path.push_str(&encode(subresource));
    }
    path
}

/// Rewrites a write's body; bodies that do not parse go unchanged, for the
/// provider to refuse exactly as it would.
fn body_down(
    bound: &BoundResource,
    request: &ResourceRequest,
    content_type: Option<&str>,
    body: &[u8],
    current_labels: Option<&Map<String, Value>>,
) -> Result<Option<(String, Vec<u8>)>, Refusal> {
    let media_type = content_type
        .and_then(|ct| ct.split(';').next())
        .map(|ct| ct.trim().to_ascii_lowercase())
        .unwrap_or_else(|| "application/json".into());
    let name = request.name.as_deref().unwrap_or_default();
    let with_labels = request.subresource.as_deref() != Some("scale");
    let parse_yaml = |body: &[u8]| serde_yaml::from_slice::<Value>(body).ok();
    let (mut value, out_type) = match media_type.as_str() {
        "application/json" => match serde_json::from_slice::<Value>(body) {
            Ok(value) => (value, media_type.clone()),
            Err(_) => return Ok(None),
        },
        "application/yaml" => match parse_yaml(body) {
            Some(value) => (value, "application/json".to_string()),
            None => return Ok(None),
        },
        "application/apply-patch+yaml" => match parse_yaml(body) {
            Some(value) => (value, media_type.clone()),
            None => return Ok(None),
        },
        "application/merge-patch+json" | "application/json-patch+json" => {
            match serde_json::from_slice::<Value>(body) {
                Ok(value) => (value, media_type.clone()),
                Err(_) => return Ok(None),
            }
        }
        _ => return Ok(None),
    };
    match media_type.as_str() {
        "application/merge-patch+json" => {
            merge_patch_down(bound, &mut value, name, current_labels)?
        }
        "application/json-patch+json" => json_patch_down(bound, &mut value, name)?,
        _ => object_down(bound, &mut value, with_labels)?,
    }
    let bytes = serde_json::to_vec(&value).expect("a JSON value serializes");
    Ok(Some((out_type, bytes)))
}

/// Percent-encodes one path segment.
pub fn encode(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for byte in segment.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~:@!$&'()*+,;=".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
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

    #[allow(clippy::too_many_arguments)]
    fn call(
        bound: &BoundResource,
        resource: &ResourceRequest,
        verb: Verb,
        query: &[(String, String)],
        content_type: Option<&str>,
        body: &[u8],
        tokens: &ContinueTokens,
        current_labels: Option<&Map<String, Value>>,
    ) -> Result<ProviderRequest, RequestError> {
        let incoming = ConsumerRequest {
            resource,
            verb,
            query,
            content_type,
            body,
            current_labels,
        };
        request_down(bound, &incoming, tokens)
    }

    fn pairs(raw: &[(&str, &str)]) -> Vec<(String, String)> {
        raw.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn list_is_narrowed_and_mapped() {
        let w = widgets();
        let tokens = ContinueTokens::random();
        let r = resource("/clusters/c1/apis/example.com/v1/namespaces/ns/widgets");
        let out = call(
            &w,
            &r,
            Verb::List,
            &pairs(&[("limit", "2"), ("fieldSelector", "metadata.namespace=ns")]),
            None,
            b"",
            &tokens,
            None,
        )
        .unwrap();
        assert_eq!(
            out.path,
            "/apis/example.com/v1/namespaces/kube-bind-c1-ns/widgets"
        );
        assert_eq!(
            out.query,
            pairs(&[
                ("limit", "2"),
                ("fieldSelector", "metadata.namespace=kube-bind-c1-ns"),
            ]),
            "a list in one namespace is checked object by object"
        );
        assert_eq!(out.body, None);

        let all = resource("/clusters/c1/apis/example.com/v1/widgets");
        for verb in [Verb::List, Verb::Watch] {
            let out = call(
                &w,
                &all,
                verb,
                &pairs(&[("labelSelector", "a=b")]),
                None,
                b"",
                &tokens,
                None,
            )
            .unwrap();
            assert_eq!(out.path, "/apis/example.com/v1/widgets");
            assert_eq!(
                out.query,
                pairs(&[("labelSelector", &format!("a=b,{}", w.identity_selector()))])
            );
        }
        let out = call(
            &w,
            &r,
            Verb::DeleteCollection,
            &[],
            None,
            b"",
            &tokens,
            None,
        )
        .unwrap();
        assert_eq!(
            out.query,
            pairs(&[("labelSelector", &w.identity_selector())])
        );
    }

    #[test]
    fn continue_tokens_are_opened_for_their_scope_only() {
        let w = widgets();
        let tokens = ContinueTokens::random();
        let r = resource("/clusters/c1/apis/example.com/v1/namespaces/ns/widgets");
        let sealed = tokens.seal(&token_scope(&w, &r), "upstream");
        let out = call(
            &w,
            &r,
            Verb::List,
            &pairs(&[("continue", &sealed)]),
            None,
            b"",
            &tokens,
            None,
        )
        .unwrap();
        assert!(out.query.contains(&("continue".into(), "upstream".into())));

        let other = resource("/clusters/c1/apis/example.com/v1/namespaces/other/widgets");
        assert_eq!(
            call(
                &w,
                &other,
                Verb::List,
                &pairs(&[("continue", &sealed)]),
                None,
                b"",
                &tokens,
                None,
            ),
            Err(RequestError::Continue(TokenError::Forged))
        );
    }

    #[test]
    fn create_body_is_stamped() {
        let w = widgets();
        let r = resource("/clusters/c1/apis/example.com/v1/namespaces/ns/widgets");
        let body = br#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"a","namespace":"ns"}}"#;
        let out = call(
            &w,
            &r,
            Verb::Create,
            &[],
            Some("application/json"),
            body,
            &ContinueTokens::random(),
            None,
        )
        .unwrap();
        let (content_type, bytes) = out.body.unwrap();
        assert_eq!(content_type, "application/json");
        let value: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(value["metadata"]["namespace"], "kube-bind-c1-ns");
        assert_eq!(value["metadata"]["labels"]["bindery.dev/consumer"], "c1");
    }

    #[test]
    fn yaml_apply_is_translated_and_bad_bodies_pass() {
        let w = widgets();
        let r = resource("/clusters/c1/apis/example.com/v1/namespaces/ns/widgets/a");
        let yaml = b"apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: a\n";
        let out = call(
            &w,
            &r,
            Verb::Patch,
            &[],
            Some("application/apply-patch+yaml"),
            yaml,
            &ContinueTokens::random(),
            None,
        )
        .unwrap();
        let (content_type, bytes) = out.body.unwrap();
        assert_eq!(content_type, "application/apply-patch+yaml");
        let value: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(value["metadata"]["labels"]["bindery.dev/consumer"], "c1");

        let out = call(
            &w,
            &r,
            Verb::Update,
            &[],
            Some("application/json"),
            b"{nope",
            &ContinueTokens::random(),
            None,
        )
        .unwrap();
        assert_eq!(out.body, None);
        let out = call(
            &w,
            &r,
            Verb::Patch,
            &[],
            Some("application/strategic-merge-patch+json"),
            b"{}",
            &ContinueTokens::random(),
            None,
        )
        .unwrap();
        assert_eq!(out.body, None);
    }

    #[test]
    fn segments_are_encoded() {
        assert_eq!(encode("a b/c"), "a%20b%2Fc");
        assert_eq!(encode("x.y-z"), "x.y-z");
    }
}
