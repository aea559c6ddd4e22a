//! What the router changes in a request it passes on, and reads of what it
//! is given (pure): a merged resourceVersion made one provider's own in a
//! query or a body, the JSON forms of an `Accept` (and the form a merged
//! list is written in), an object's annotations.

use super::version;
use crate::status::ApiError;
use crate::wire::accept::{MetaVersion, Output, Target};
use bytes::Bytes;
use http::header::{ACCEPT, ACCEPT_ENCODING, CONTENT_TYPE, USER_AGENT};
use http::{HeaderMap, HeaderValue};
use serde_json::Value;

pub(super) fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .is_some_and(|ct| ct.as_bytes().starts_with(b"application/json"))
}

/// The headers a merged read asks each provider with: the caller's, its
/// `Accept` cut to the JSON forms (the router joins JSON); kube-apiserver's
/// 406 when the caller accepts none of them.
pub(super) fn json_accept(headers: &HeaderMap) -> Result<HeaderMap, ApiError> {
    let asked = headers
        .get_all(ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .collect::<Vec<_>>();
    let json: Vec<&str> = asked
        .iter()
        .copied()
        .filter(|range| {
            let media = range.split(';').next().unwrap_or_default().trim();
            matches!(media, "application/json" | "application/*" | "*/*")
        })
        .collect();
    let accept = match (asked.is_empty(), json.is_empty()) {
        (true, _) => "application/json".to_string(),
        (false, true) => {
            return Err(ApiError::route_not_acceptable(&["application/json"]));
        }
        (false, false) => json.join(", "),
    };
    let mut out = headers.clone();
    out.remove(ACCEPT);
    // The router reads what it is given.
    out.remove(ACCEPT_ENCODING);
    out.insert(
        ACCEPT,
        HeaderValue::from_str(&accept).map_err(|e| ApiError::bad_request(e.to_string()))?,
    );
    if let Some(agent) = headers.get(USER_AGENT) {
        out.insert(USER_AGENT, agent.clone());
    }
    Ok(out)
}

/// A merged list's form, negotiated from the caller's `Accept` as
/// kube-apiserver negotiates a custom resource's list (`as=Table`,
/// `as=PartialObjectMetadataList`, protobuf for those, YAML), and the
/// headers each provider is asked with: the caller's, asking for the same
/// list in JSON (the router joins JSON, and writes the list in the form
/// negotiated).
pub(super) fn negotiated_list(headers: &HeaderMap) -> Result<(HeaderMap, Output), ApiError> {
    let accept = headers.get(ACCEPT).and_then(|value| value.to_str().ok());
    let output = crate::wire::accept::output(accept)?;
    let meta = |kind: &str, version: MetaVersion| {
        let version = version.api_version().trim_start_matches("meta.k8s.io/");
        format!("application/json;as={kind};v={version};g=meta.k8s.io")
    };
    let asked = match output.target {
        Target::Resource => "application/json".to_string(),
        Target::Table(version) => meta("Table", version),
        Target::PartialObjectMetadata(version) => meta("PartialObjectMetadata", version),
        Target::PartialObjectMetadataList(version) => meta("PartialObjectMetadataList", version),
    };
    let mut out = headers.clone();
    // The router reads what it is given, and compresses what it answers.
    out.remove(ACCEPT_ENCODING);
    out.insert(
        ACCEPT,
        HeaderValue::from_str(&asked).map_err(|e| ApiError::bad_request(e.to_string()))?,
    );
    Ok((out, output))
}

/// The annotations a JSON request body's object (or merge patch) gives.
pub(super) fn annotations_of(headers: &HeaderMap, body: &Bytes) -> Option<Value> {
    let json = headers
        .get(CONTENT_TYPE)
        .and_then(|ct| ct.to_str().ok())
        .is_some_and(|ct| ct.contains("json"));
    if !json || body.is_empty() {
        return None;
    }
    let value: Value = crate::deep::from_slice(body).ok()?;
    value.pointer("/metadata/annotations").cloned()
}

/// The decoded value of `key` in the raw query `raw` (its first), or empty.
pub(super) fn query_value(raw: &str, key: &str) -> String {
    form_urlencoded::parse(raw.as_bytes())
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

/// The raw query `raw` with each pair through `rewrite` (`None` leaves it
/// out), encoded again.
pub(super) fn rewritten_query(raw: &str, rewrite: impl Fn(&str, &str) -> Option<String>) -> String {
    let mut out = form_urlencoded::Serializer::new(String::new());
    for (key, value) in form_urlencoded::parse(raw.as_bytes()) {
        if let Some(value) = rewrite(&key, &value) {
            out.append_pair(&key, &value);
        }
    }
    out.finish()
}

/// What a read across namespaces asks, read from its query once.
#[derive(Debug, Default, PartialEq)]
pub(super) struct ListQuery {
    /// A limit above zero.
    pub limit: Option<usize>,
    pub continue_token: String,
    pub resource_version: String,
    /// `resourceVersionMatch`.
    pub matching: String,
    /// Whether it selects by label or field (kube-apiserver then counts no
    /// entries that remain after a page).
    pub selects: bool,
    /// Whether a Table's rows were asked without their objects
    /// (`includeObject=None`), which the router drops again.
    pub no_row_objects: bool,
    /// The query each provider is asked with: rows with at least their
    /// object's metadata (`includeObject=None` asked as `Metadata`), so
    /// that the router places and filters each row by its object as it
    /// does an item.
    pub asked: String,
}

impl ListQuery {
    pub(super) fn of(raw: &str) -> Self {
        let mut query = ListQuery::default();
        let mut asked = form_urlencoded::Serializer::new(String::new());
        for (key, value) in form_urlencoded::parse(raw.as_bytes()) {
            match &*key {
                "limit" => query.limit = value.parse().ok().filter(|l| *l > 0),
                "continue" => query.continue_token = value.to_string(),
                "resourceVersion" => query.resource_version = value.to_string(),
                "resourceVersionMatch" => query.matching = value.to_string(),
                "labelSelector" | "fieldSelector" if !value.is_empty() => query.selects = true,
                "includeObject" if value == "None" => query.no_row_objects = true,
                _ => {}
            }
            let value = match (&*key, &*value) {
                ("includeObject", "None") => "Metadata",
                (_, value) => value,
            };
            asked.append_pair(&key, value);
        }
        query.asked = asked.finish();
        query
    }
}

/// A JSON request body for provider `index`: a merged resourceVersion in
/// its `metadata` or its delete preconditions made the provider's own.
/// Anything else goes as it came.
pub(super) fn routed_body(
    headers: &HeaderMap,
    body: Bytes,
    index: usize,
    providers: usize,
) -> Bytes {
    let json = headers
        .get(CONTENT_TYPE)
        .and_then(|ct| ct.to_str().ok())
        .is_some_and(|ct| ct.contains("json"));
    if !json || providers < 2 || body.is_empty() {
        return body;
    }
    let Ok(mut value) = crate::deep::from_slice::<Value>(&body) else {
        return body;
    };
    let mut changed = false;
    for pointer in [
        "/metadata/resourceVersion",
        "/preconditions/resourceVersion",
    ] {
        if let Some(slot) = value.pointer_mut(pointer)
            && let Some(text) = slot.as_str()
        {
            let own = version::routed(text, index, providers);
            if own != text {
                *slot = Value::String(own);
                changed = true;
            }
        }
    }
    match changed.then(|| serde_json::to_vec(&value)) {
        Some(Ok(bytes)) => Bytes::from(bytes),
        _ => body,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_query_is_read_once_and_rows_are_asked_with_their_objects_metadata() {
        let query = ListQuery::of(
            "includeObject=None&limit=2&continue=t&resourceVersion=5&resourceVersionMatch=Exact&labelSelector=a%3Db",
        );
        assert_eq!(
            query,
            ListQuery {
                limit: Some(2),
                continue_token: "t".into(),
                resource_version: "5".into(),
                matching: "Exact".into(),
                selects: true,
                no_row_objects: true,
                asked: "includeObject=Metadata&limit=2&continue=t&resourceVersion=5&resourceVersionMatch=Exact&labelSelector=a%3Db".into(),
            }
        );
        let plain = ListQuery::of("includeObject=Object&limit=0&fieldSelector=");
        assert_eq!(plain.asked, "includeObject=Object&limit=0&fieldSelector=");
        assert_eq!(
            (plain.limit, plain.selects, plain.no_row_objects),
            (None, false, false)
        );
        assert_eq!(ListQuery::of(""), ListQuery::default());
    }

    #[test]
    fn a_merged_list_is_asked_of_the_providers_in_json_and_written_as_negotiated() {
        let mut headers = HeaderMap::new();
        headers.insert(
            ACCEPT,
            HeaderValue::from_static(
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
            ),
        );
        let (asked, output) = negotiated_list(&headers).expect("negotiated");
        assert_eq!(
            asked[ACCEPT],
            "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
        );
        assert_eq!(output.media, crate::wire::accept::Media::Protobuf);
        headers.insert(ACCEPT, HeaderValue::from_static("application/yaml"));
        let (asked, output) = negotiated_list(&headers).expect("negotiated");
        assert_eq!(asked[ACCEPT], "application/json");
        assert_eq!(output.media, crate::wire::accept::Media::Yaml);
        headers.insert(ACCEPT, HeaderValue::from_static("text/html"));
        assert_eq!(negotiated_list(&headers).expect_err("none").code, 406);
    }

    #[test]
    fn a_query_keeps_its_pairs_but_those_rewritten() {
        let query =
            rewritten_query(
                "labelSelector=a%3Db&resourceVersion=1.2&limit=5",
                |k, v| match k {
                    "resourceVersion" => Some(version::routed(v, 1, 2)),
                    "limit" => None,
                    _ => Some(v.to_string()),
                },
            );
        assert_eq!(query, "labelSelector=a%3Db&resourceVersion=2");
        assert_eq!(
            query_value("a=1&resourceVersion=7.8", "resourceVersion"),
            "7.8"
        );
        assert_eq!(query_value("a=1", "continue"), "");
    }

    #[test]
    fn a_merged_version_in_a_body_becomes_the_providers_own() {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let body = Bytes::from_static(br#"{"metadata":{"name":"a","resourceVersion":"10.20"}}"#);
        let routed = routed_body(&headers, body.clone(), 1, 2);
        let value: Value = serde_json::from_slice(&routed).expect("JSON");
        assert_eq!(value["metadata"]["resourceVersion"], "20");
        let own = Bytes::from_static(br#"{"metadata":{"resourceVersion":"20"}}"#);
        assert_eq!(routed_body(&headers, own.clone(), 1, 2), own);
        let preconditions = Bytes::from_static(br#"{"preconditions":{"resourceVersion":"3.4"}}"#);
        let routed: Value =
            serde_json::from_slice(&routed_body(&headers, preconditions, 0, 2)).expect("JSON");
        assert_eq!(routed["preconditions"]["resourceVersion"], "3");
    }

    #[test]
    fn a_merged_read_asks_in_json_or_is_refused() {
        let mut headers = HeaderMap::new();
        headers.insert(
            ACCEPT,
            HeaderValue::from_static(
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
            ),
        );
        let asked = json_accept(&headers).expect("JSON accepted");
        assert_eq!(
            asked[ACCEPT],
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json"
        );
        headers.insert(
            ACCEPT,
            HeaderValue::from_static("application/vnd.kubernetes.protobuf"),
        );
        assert_eq!(json_accept(&headers).expect_err("protobuf only").code, 406);
        assert_eq!(
            json_accept(&HeaderMap::new()).expect("none")[ACCEPT],
            "application/json"
        );
    }
}
