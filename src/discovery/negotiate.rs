//! Which discovery document a request to `/api` or `/apis` asked for.
//! kube-apiserver serves aggregated discovery when the first `Accept` clause
//! (in q order) that it can serve and that names
//! `g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList` exists, and the
//! unaggregated document otherwise (`v2beta1` is off since 1.33). bindery
//! serves JSON only, so only `application/json`, `application/*` and `*/*`
//! clauses can match: a protobuf clause is skipped as the real server skips
//! a type it lacks. The header is parsed by [`crate::wire::accept`]'s
//! goautoneg reader, as every other `Accept` is.

use crate::wire::accept::parse_accept;

/// The `Content-Type` of an aggregated discovery response.
pub const AGGREGATED_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
/// The `Content-Type` of an unaggregated discovery response.
pub const LEGACY_CONTENT_TYPE: &str = "application/json";

/// The discovery document to answer with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiscoveryFormat {
    /// `apidiscovery.k8s.io/v2` `APIGroupDiscoveryList`.
    Aggregated,
    /// `APIVersions` / `APIGroupList`.
    Legacy,
}

impl DiscoveryFormat {
    /// The exact `Content-Type` to answer with.
    pub fn content_type(self) -> &'static str {
        match self {
            DiscoveryFormat::Aggregated => AGGREGATED_CONTENT_TYPE,
            DiscoveryFormat::Legacy => LEGACY_CONTENT_TYPE,
        }
    }
}

/// Decides from the request's `Accept` header (its first value; `None` when
/// absent).
pub fn negotiate(accept: Option<&str>) -> DiscoveryFormat {
    let Some(header) = accept.filter(|h| !h.is_empty()) else {
        return DiscoveryFormat::Legacy;
    };
    for clause in parse_accept(header) {
        let json = matches!(
            (clause.kind.as_str(), clause.sub_kind.as_str()),
            ("application", "json") | ("application", "*") | ("*", "*")
        );
        if json && clause.param("g") == Some("apidiscovery.k8s.io") && clause.param("v") == Some("v2")
            && clause.param("as") == Some("APIGroupDiscoveryList")
            // Discovery allows the watch stream schema and no server version.
            && clause.param("stream").is_none_or(|s| s.is_empty() || s == "watch")
            && clause.param("sv").is_none_or(str::is_empty)
        {
            return DiscoveryFormat::Aggregated;
        }
    }
    DiscoveryFormat::Legacy
}

#[cfg(test)]
mod tests {
    use super::*;
    use DiscoveryFormat::*;

    #[test]
    fn client_go_and_kubectl_headers() {
        // client-go's discovery client (AcceptV2, AcceptV2Beta1, AcceptV1).
        let client_go = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,\
                         application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(negotiate(Some(client_go)), Aggregated);
        // With protobuf preferred, which bindery cannot serve, JSON v2 still wins.
        let proto_first = "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,\
                           application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
        assert_eq!(negotiate(Some(proto_first)), Aggregated);
        // Older clients that only know v2beta1 get the unaggregated document (1.33+).
        let beta_only = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(negotiate(Some(beta_only)), Legacy);
    }

    #[test]
    fn plain_and_missing_headers_are_legacy() {
        for h in [
            None,
            Some(""),
            Some("application/json"),
            Some("*/*"),
            Some("application/yaml"),
            Some("garbage"),
        ] {
            assert_eq!(negotiate(h), Legacy, "{h:?}");
        }
    }

    #[test]
    fn first_servable_aggregated_clause_wins_even_after_plain_json() {
        // The real server skips clauses its discovery restrictions reject
        // (any without the aggregated GVK), so order among q=1 does not matter.
        assert_eq!(
            negotiate(Some(
                "application/json, application/json;as=APIGroupDiscoveryList;v=v2;g=apidiscovery.k8s.io"
            )),
            Aggregated
        );
        assert_eq!(
            negotiate(Some(
                "*/*;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
            )),
            Aggregated
        );
        assert_eq!(
            negotiate(Some(
                "application/*;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
            )),
            Aggregated
        );
        // Spaces around parameters are trimmed.
        assert_eq!(
            negotiate(Some(
                "application/json; g=apidiscovery.k8s.io; v=v2; as=APIGroupDiscoveryList"
            )),
            Aggregated
        );
        // Wrong kind, version or group: not aggregated.
        assert_eq!(
            negotiate(Some(
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupList"
            )),
            Legacy
        );
        assert_eq!(
            negotiate(Some(
                "application/json;g=apidiscovery.k8s.io;v=v1;as=APIGroupDiscoveryList"
            )),
            Legacy
        );
        assert_eq!(
            negotiate(Some(
                "application/json;g=example.com;v=v2;as=APIGroupDiscoveryList"
            )),
            Legacy
        );
        // Of the stream schemas discovery allows only watch, and no server version.
        let agg = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
        assert_eq!(negotiate(Some(&format!("{agg};stream=watch"))), Aggregated);
        assert_eq!(negotiate(Some(&format!("{agg};stream=other"))), Legacy);
        assert_eq!(negotiate(Some(&format!("{agg};sv=v1"))), Legacy);
    }

    #[test]
    fn content_types() {
        assert_eq!(
            Aggregated.content_type(),
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        );
        assert_eq!(Legacy.content_type(), "application/json");
    }

    #[test]
    fn parse_accept_orders_like_goautoneg() {
        let c = parse_accept(
            "text/*;q=0.5, */*;q=0.1, application/json;q=0.9, bad, a/b/c, *;x=1, application/yaml",
        );
        let got: Vec<(String, f64)> = c
            .iter()
            .map(|c| (format!("{}/{}", c.kind, c.sub_kind), c.q))
            .collect();
        let want = [
            ("application/yaml", 1.0),
            ("*/*", 1.0),
            ("application/json", 0.9),
            ("text/*", 0.5),
            ("*/*", 0.1),
        ];
        let got: Vec<(&str, f64)> = got
            .iter()
            .map(|(k, q)| (k.as_str(), (q * 10.0).round() / 10.0))
            .collect();
        assert_eq!(got, want);
    }
}
