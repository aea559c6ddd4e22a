//! Which discovery document a request to `/api` or `/apis` asked for.
//! kube-apiserver serves aggregated discovery when the first `Accept` clause
//! (in q order) that it can serve and that names
//! `g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList` exists, and the
//! unaggregated document otherwise (`v2beta1` is off since 1.33). bindery
//! serves JSON only, so only `application/json`, `application/*` and `*/*`
//! clauses can match: a protobuf clause is skipped as the real server skips
//! a type it lacks. The parsing follows `github.com/munnerz/goautoneg`.

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
            (clause.kind.as_str(), clause.sub.as_str()),
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

/// One clause of an `Accept` header.
#[derive(Debug, Clone, PartialEq)]
struct Clause {
    kind: String,
    sub: String,
    q: f64,
    /// In header order; a repeated name counts with its last value.
    params: Vec<(String, String)>,
}

impl Clause {
    fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Splits at the first `sep`: (before, after), or (s, "") without one.
fn split_first(s: &str, sep: char) -> (&str, &str) {
    s.split_once(sep).unwrap_or((s, ""))
}

/// goautoneg's `ParseAccept`: malformed clauses are dropped, then clauses are
/// ordered by q and specificity with Go's insertion sort (which it uses for
/// the short lists headers have).
fn parse_accept(header: &str) -> Vec<Clause> {
    let trim = |s: &str| s.trim_matches(' ').to_string();
    let mut out: Vec<Clause> = Vec::new();
    let mut remaining = header;
    while !remaining.is_empty() {
        let (part, rest) = split_first(remaining, ',');
        remaining = rest;
        let part = part.trim_matches(' ');
        let (media, mut params_str) = split_first(part, ';');
        let (kind, sub_rest) = split_first(media, '/');
        let kind = trim(kind);
        let sub = if sub_rest.is_empty() {
            if kind != "*" {
                continue;
            }
            "*".to_string()
        } else {
            let (sub, extra) = split_first(sub_rest, '/');
            if !extra.is_empty() {
                continue;
            }
            trim(sub)
        };
        let mut clause = Clause {
            kind,
            sub,
            q: 1.0,
            params: Vec::new(),
        };
        while !params_str.is_empty() {
            let (param, rest) = split_first(params_str, ';');
            params_str = rest;
            let (name, value_rest) = split_first(param, '=');
            if value_rest.is_empty() {
                continue;
            }
            let (value, extra) = split_first(value_rest, '=');
            if !extra.is_empty() {
                continue;
            }
            let name = trim(name);
            if name == "q" {
                // Go parses q as a float32, and a bad one as 0.
                clause.q = value.parse::<f32>().map(f64::from).unwrap_or(0.0);
            } else {
                clause.params.push((name, trim(value)));
            }
        }
        out.push(clause);
    }
    let less = |a: &Clause, b: &Clause| {
        a.q > b.q || (a.kind != "*" && b.kind == "*") || (a.sub != "*" && b.sub == "*")
    };
    for i in 1..out.len() {
        let mut j = i;
        while j > 0 && less(&out[j], &out[j - 1]) {
            out.swap(j, j - 1);
            j -= 1;
        }
    }
    out
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
            .map(|c| (format!("{}/{}", c.kind, c.sub), c.q))
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
