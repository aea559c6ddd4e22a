//! Query parameters as kube-apiserver reads them (`k8s.io/apimachinery`
//! v0.34 `runtime/conversion.go` and the generated `url.Values` conversions
//! of `pkg/apis/meta/v1`), for each verb: which parameters count, how their
//! values parse, and the 400 a bad one gets. bindery forwards the options it
//! parsed, encoded again, and nothing else: parameters kube-apiserver does
//! not read are dropped, as it ignores them. Pure.
//!
//! The rules that matter most:
//! - the raw query splits as Go's `url.ParseQuery` splits it: a pair with
//!   `;` or a bad escape is dropped, `+` is a space, names are
//!   case-sensitive, and only the first value of a name counts (but
//!   `dryRun`, which takes them all);
//! - a boolean is false only for `0` and `false` in any case, so
//!   `watch=yes`, `watch=2` and a bare `watch` are watches;
//! - an integer is Go's `strconv.ParseInt(v, 10, 64)`, so `limit=` is a 400.

use super::go_quote::go_quote;
use super::selector;
use crate::status::ApiError;

/// A query as Go's `url.ParseQuery` reads it, pairs in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Query {
    pairs: Vec<(String, String)>,
}

impl Query {
    /// Splits the raw query (`uri.query()`).
    pub fn parse(raw: Option<&str>) -> Self {
        let mut pairs = Vec::new();
        for pair in raw.unwrap_or_default().split('&') {
            if pair.is_empty() || pair.contains(';') {
                continue;
            }
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            if let (Some(key), Some(value)) = (
                crate::percent::decode_query(key),
                crate::percent::decode_query(value),
            ) {
                pairs.push((key, value));
            }
        }
        Self { pairs }
    }

    /// The first value of `key`.
    pub fn first(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of `key`, in order.
    pub fn all(&self, key: &str) -> Vec<String> {
        self.pairs
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .collect()
    }

    pub fn contains(&self, key: &str) -> bool {
        self.first(key).is_some()
    }
}

/// Go's `Convert_Slice_string_To_bool`: false for `0` and `false` in any case.
pub fn go_bool(value: &str) -> bool {
    !(value == "0" || value.eq_ignore_ascii_case("false"))
}

/// Go's `strconv.ParseInt(value, 10, 64)`, with its error as kube-apiserver
/// answers it (400, the error's text).
pub fn go_int64(value: &str) -> Result<i64, ApiError> {
    let digits = value.strip_prefix(['+', '-']).unwrap_or(value);
    let error = |why: &str| {
        ApiError::bad_request(format!(
            "strconv.ParseInt: parsing {}: {why}",
            go_quote(value)
        ))
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(error("invalid syntax"));
    }
    value
        .parse::<i64>()
        .map_err(|_| error("value out of range"))
}

/// Go's `time.ParseDuration`, with its error text.
pub fn go_duration(text: &str) -> Result<std::time::Duration, String> {
    let invalid = || format!("time: invalid duration {}", time_quote(text));
    let mut rest = text;
    let mut negative = false;
    if let Some(stripped) = rest.strip_prefix(['-', '+']) {
        negative = rest.starts_with('-');
        rest = stripped;
    }
    if rest == "0" {
        return Ok(std::time::Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: f64 = 0.0;
    while !rest.is_empty() {
        let bytes = rest.as_bytes();
        if !(bytes[0] == b'.' || bytes[0].is_ascii_digit()) {
            return Err(invalid());
        }
        let digits = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
        let whole = &rest[..digits];
        rest = &rest[digits..];
        let mut fraction = "";
        if let Some(after) = rest.strip_prefix('.') {
            let n = after.bytes().take_while(u8::is_ascii_digit).count();
            fraction = &after[..n];
            rest = &after[n..];
        }
        if whole.is_empty() && fraction.is_empty() {
            return Err(invalid());
        }
        let unit_len = rest
            .bytes()
            .take_while(|b| !(*b == b'.' || b.is_ascii_digit()))
            .count();
        if unit_len == 0 {
            return Err(format!(
                "time: missing unit in duration {}",
                time_quote(text)
            ));
        }
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let nanos: f64 = match unit {
            "ns" => 1.0,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => {
                return Err(format!(
                    "time: unknown unit {} in duration {}",
                    time_quote(unit),
                    time_quote(text)
                ));
            }
        };
        let value: f64 = format!(
            "{}.{}",
            if whole.is_empty() { "0" } else { whole },
            fraction
        )
        .parse()
        .map_err(|_| invalid())?;
        total += value * nanos;
        if total > i64::MAX as f64 {
            return Err(invalid());
        }
    }
    if negative {
        return Ok(std::time::Duration::ZERO);
    }
    Ok(std::time::Duration::from_nanos(total as u64))
}

/// The `time` package's own quoting: ASCII as it is (`"` and `\` escaped),
/// anything else byte by byte as `\xNN`.
fn time_quote(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        if (c as u32) < 0x20 || (c as u32) >= 0x80 {
            let mut buffer = [0u8; 4];
            for byte in c.encode_utf8(&mut buffer).bytes() {
                out.push_str(&format!("\\x{byte:02x}"));
            }
        } else {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
    }
    out.push('"');
    out
}

/// The `timeout` parameter of a request that is not a watch, as
/// kube-apiserver's request-deadline filter reads it (first of all);
/// `None` when there is none.
pub fn timeout(query: &Query) -> Result<Option<String>, ApiError> {
    let Some(value) = query.first("timeout").filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    go_duration(value).map_err(|error| {
        ApiError::bad_request(format!(
            "invalid timeout specified in the request URL - {error}"
        ))
    })?;
    Ok(Some(value.to_string()))
}

/// A query's pairs to forward, in the order they were added.
pub type Pairs = Vec<(String, String)>;

fn put(out: &mut Pairs, key: &str, value: impl Into<String>) {
    out.push((key.to_string(), value.into()));
}

fn put_nonempty(out: &mut Pairs, key: &str, value: &str) {
    if !value.is_empty() {
        put(out, key, value);
    }
}

fn bool_text(value: bool) -> &'static str {
    if value { "true" } else { "false" }
}

/// `ListOptions`: list, watch and deletecollection.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListOptions {
    pub label_selector: String,
    pub field_selector: String,
    pub watch: bool,
    pub allow_watch_bookmarks: bool,
    pub resource_version: String,
    pub resource_version_match: String,
    pub timeout_seconds: Option<i64>,
    pub limit: i64,
    pub continue_token: String,
    pub send_initial_events: Option<bool>,
}

impl ListOptions {
    /// Reads the parameters in the order kube-apiserver's conversion does,
    /// so the first bad one is the one it names: the numbers (url values to
    /// `v1.ListOptions`), then the label and field selectors (`v1` to the
    /// internal `ListOptions`). The selectors are kept as kube-apiserver
    /// writes them again once parsed, so what is forwarded is what bindery
    /// read, not what the caller sent.
    pub fn parse(query: &Query) -> Result<Self, ApiError> {
        let text = |key| query.first(key).unwrap_or_default().to_string();
        let timeout_seconds = query.first("timeoutSeconds").map(go_int64).transpose()?;
        let limit = query.first("limit").map(go_int64).transpose()?.unwrap_or(0);
        let label_selector = selector::parse_label_selector(&text("labelSelector"))
            .map_err(ApiError::bad_request)?
            .encode();
        let field_selector = selector::parse_field_selector(&text("fieldSelector"))
            .map_err(ApiError::bad_request)?
            .encode();
        Ok(Self {
            label_selector,
            field_selector,
            watch: query.first("watch").is_some_and(go_bool),
            allow_watch_bookmarks: query.first("allowWatchBookmarks").is_some_and(go_bool),
            resource_version: text("resourceVersion"),
            resource_version_match: text("resourceVersionMatch"),
            timeout_seconds,
            limit,
            continue_token: text("continue"),
            send_initial_events: query.first("sendInitialEvents").map(go_bool),
        })
    }

    /// Whether a GET without a name is a watch, as kube-apiserver's request
    /// info decides even when the other parameters do not parse.
    pub fn is_watch(query: &Query) -> bool {
        query.first("watch").is_some_and(go_bool)
    }

    /// The parameters to forward, with the selectors and token given (the
    /// caller's, translated).
    pub fn encode(&self, out: &mut Pairs) {
        put_nonempty(out, "labelSelector", &self.label_selector);
        put_nonempty(out, "fieldSelector", &self.field_selector);
        if self.watch {
            put(out, "watch", "true");
        }
        if self.allow_watch_bookmarks {
            put(out, "allowWatchBookmarks", "true");
        }
        put_nonempty(out, "resourceVersion", &self.resource_version);
        put_nonempty(out, "resourceVersionMatch", &self.resource_version_match);
        if let Some(seconds) = self.timeout_seconds {
            put(out, "timeoutSeconds", seconds.to_string());
        }
        if self.limit != 0 {
            put(out, "limit", self.limit.to_string());
        }
        put_nonempty(out, "continue", &self.continue_token);
        if let Some(send) = self.send_initial_events {
            put(out, "sendInitialEvents", bool_text(send));
        }
    }
}

/// `GetOptions`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetOptions {
    pub resource_version: String,
}

impl GetOptions {
    pub fn parse(query: &Query) -> Result<Self, ApiError> {
        if query.first("export").is_some_and(go_bool) {
            return Err(ApiError::bad_request(
                "the export parameter, deprecated since v1.14, is no longer supported",
            ));
        }
        Ok(Self {
            resource_version: query.first("resourceVersion").unwrap_or_default().into(),
        })
    }

    pub fn encode(&self, out: &mut Pairs) {
        put_nonempty(out, "resourceVersion", &self.resource_version);
    }
}

/// `CreateOptions`, `UpdateOptions` and `PatchOptions` (`force` is the
/// patch's alone; kube-apiserver refuses it on other patches itself).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteOptions {
    pub dry_run: Vec<String>,
    pub field_manager: String,
    pub field_validation: String,
    pub force: Option<bool>,
}

impl WriteOptions {
    pub fn parse(query: &Query, patch: bool) -> Self {
        Self {
            dry_run: query.all("dryRun"),
            field_manager: query.first("fieldManager").unwrap_or_default().into(),
            field_validation: query.first("fieldValidation").unwrap_or_default().into(),
            force: if patch {
                query.first("force").map(go_bool)
            } else {
                None
            },
        }
    }

    pub fn encode(&self, out: &mut Pairs) {
        for value in &self.dry_run {
            put(out, "dryRun", value.clone());
        }
        put_nonempty(out, "fieldManager", &self.field_manager);
        put_nonempty(out, "fieldValidation", &self.field_validation);
        if let Some(force) = self.force {
            put(out, "force", bool_text(force));
        }
    }

    /// The field validation in force: `Warn` unless asked otherwise.
    pub fn validation(&self) -> FieldValidation {
        match self.field_validation.as_str() {
            "Ignore" => FieldValidation::Ignore,
            "Strict" => FieldValidation::Strict,
            _ => FieldValidation::Warn,
        }
    }
}

/// How kube-apiserver treats fields it cannot keep (duplicates, unknown).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

/// `DeleteOptions` from the query, used only when the request has no body.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    pub grace_period_seconds: Option<i64>,
    pub orphan_dependents: Option<bool>,
    pub propagation_policy: Option<String>,
    pub dry_run: Vec<String>,
    pub precondition_uid: String,
    pub precondition_resource_version: String,
}

impl DeleteOptions {
    pub fn parse(query: &Query) -> Result<Self, ApiError> {
        Ok(Self {
            grace_period_seconds: query
                .first("gracePeriodSeconds")
                .map(go_int64)
                .transpose()?,
            orphan_dependents: query.first("orphanDependents").map(go_bool),
            propagation_policy: query.first("propagationPolicy").map(str::to_string),
            dry_run: query.all("dryRun"),
            precondition_uid: query.first("uid").unwrap_or_default().into(),
            precondition_resource_version: query
                .first("resourceVersion")
                .unwrap_or_default()
                .into(),
        })
    }

    /// These options as the JSON `DeleteOptions` body bindery sends, so
    /// that a delete always carries exactly one set of options.
    pub fn to_json(&self) -> serde_json::Value {
        let mut out = serde_json::Map::new();
        out.insert("kind".into(), "DeleteOptions".into());
        out.insert("apiVersion".into(), "meta.k8s.io/v1".into());
        if let Some(seconds) = self.grace_period_seconds {
            out.insert("gracePeriodSeconds".into(), seconds.into());
        }
        let mut preconditions = serde_json::Map::new();
        if !self.precondition_uid.is_empty() {
            preconditions.insert("uid".into(), self.precondition_uid.clone().into());
        }
        if !self.precondition_resource_version.is_empty() {
            preconditions.insert(
                "resourceVersion".into(),
                self.precondition_resource_version.clone().into(),
            );
        }
        if !preconditions.is_empty() {
            out.insert("preconditions".into(), preconditions.into());
        }
        if let Some(orphan) = self.orphan_dependents {
            out.insert("orphanDependents".into(), orphan.into());
        }
        if let Some(policy) = &self.propagation_policy {
            out.insert("propagationPolicy".into(), policy.clone().into());
        }
        if !self.dry_run.is_empty() {
            out.insert("dryRun".into(), self.dry_run.clone().into());
        }
        serde_json::Value::Object(out)
    }
}

/// What a Table row carries of its object (`TableOptions.includeObject`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IncludeObject {
    None,
    /// The default: a `PartialObjectMetadata`.
    #[default]
    Metadata,
    Object,
}

/// `TableOptions`, read only when a Table was negotiated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableOptions {
    pub include_object: IncludeObject,
    /// The parameter named `-` (the field's JSON tag): no column definitions.
    pub no_headers: bool,
}

impl TableOptions {
    pub fn parse(query: &Query) -> Result<Self, ApiError> {
        let include_object = match query.first("includeObject").unwrap_or_default() {
            "" | "Metadata" => IncludeObject::Metadata,
            "None" => IncludeObject::None,
            "Object" => IncludeObject::Object,
            other => {
                return Err(ApiError::bad_request(format!(
                    "Unable to convert to Table as requested: includeObject: Invalid value: {}: must be 'Metadata', 'Object', 'None', or empty",
                    go_quote(other)
                )));
            }
        };
        Ok(Self {
            include_object,
            no_headers: query.first("-").is_some_and(go_bool),
        })
    }
}

/// Whether a JSON answer is indented (`isPrettyPrint`): `?pretty=` as Go's
/// `strconv.ParseBool` reads it, else a browser or command-line client's
/// User-Agent.
pub fn pretty(query: &Query, user_agent: Option<&str>) -> bool {
    if let Some(value) = query.first("pretty").filter(|v| !v.is_empty()) {
        return matches!(value, "1" | "t" | "T" | "TRUE" | "true" | "True");
    }
    user_agent.is_some_and(|agent| {
        ["curl", "Wget", "Mozilla/5.0"]
            .iter()
            .any(|prefix| agent.starts_with(prefix))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(raw: &str) -> Query {
        Query::parse(Some(raw))
    }

    #[test]
    fn the_query_splits_as_gos_parse_query() {
        let q = query("a=1&a=2&b&c=x+y&d=%41&e=%zz&f=1;g=2&&Watch=true");
        assert_eq!(q.all("a"), ["1", "2"]);
        assert_eq!(q.first("b"), Some(""));
        assert_eq!(q.first("c"), Some("x y"));
        assert_eq!(q.first("d"), Some("A"));
        assert_eq!(q.first("e"), None, "a bad escape drops the pair");
        assert_eq!(q.first("f"), None, "a pair with ; is dropped");
        assert_eq!(q.first("watch"), None, "names are case-sensitive");
        assert_eq!(Query::parse(None), Query::default());
    }

    /// kube-apiserver's rule, not bindery's old `true`/`1`: every value but
    /// `0` and `false` (any case) is a watch.
    #[test]
    fn watch_is_every_value_but_zero_and_false() {
        for raw in [
            "watch=yes",
            "watch=2",
            "watch=TRUE",
            "watch=",
            "watch",
            "watch=00",
        ] {
            assert!(ListOptions::is_watch(&query(raw)), "{raw}");
            assert!(ListOptions::parse(&query(raw)).unwrap().watch, "{raw}");
        }
        for raw in [
            "watch=0",
            "watch=false",
            "watch=FaLsE",
            "",
            "watch=0&watch=1",
        ] {
            assert!(!ListOptions::is_watch(&query(raw)), "{raw}");
        }
    }

    #[test]
    fn integers_parse_as_go_parses_them() {
        assert_eq!(go_int64("+5").unwrap(), 5);
        assert_eq!(go_int64("-5").unwrap(), -5);
        for (raw, message) in [
            ("", r#"strconv.ParseInt: parsing "": invalid syntax"#),
            ("abc", r#"strconv.ParseInt: parsing "abc": invalid syntax"#),
            (" 1", r#"strconv.ParseInt: parsing " 1": invalid syntax"#),
            ("1e3", r#"strconv.ParseInt: parsing "1e3": invalid syntax"#),
            ("+", r#"strconv.ParseInt: parsing "+": invalid syntax"#),
            (
                "99999999999999999999",
                r#"strconv.ParseInt: parsing "99999999999999999999": value out of range"#,
            ),
        ] {
            let error = go_int64(raw).unwrap_err();
            assert_eq!(
                (error.code, error.message.as_str()),
                (400, message),
                "{raw}"
            );
            assert_eq!(error.details, None);
        }
        let error = ListOptions::parse(&query("limit=&timeoutSeconds=x")).unwrap_err();
        assert_eq!(
            error.message, r#"strconv.ParseInt: parsing "x": invalid syntax"#,
            "timeoutSeconds is converted before limit"
        );
    }

    #[test]
    fn selectors_are_read_after_the_numbers_and_forwarded_as_read() {
        let error = ListOptions::parse(&query("labelSelector=%2C&limit=x")).unwrap_err();
        assert_eq!(
            error.message, r#"strconv.ParseInt: parsing "x": invalid syntax"#,
            "numbers are converted before selectors"
        );
        let error = ListOptions::parse(&query("fieldSelector=a&labelSelector=%2C")).unwrap_err();
        assert_eq!(
            (error.code, error.message.as_str()),
            (
                400,
                "found ',', expected: !, identifier, or 'end of string'"
            ),
            "the label selector is read before the field selector"
        );
        let error = ListOptions::parse(&query("fieldSelector=a")).unwrap_err();
        assert_eq!(error.message, "invalid selector: 'a'; can't understand 'a'");
        // A NUL where a token starts ends a label selector: the rest is
        // never forwarded.
        let options = ListOptions::parse(&query(
            "labelSelector=a%3Db%20%00junk(&fieldSelector=x%3D%3Dy",
        ))
        .unwrap();
        assert_eq!(options.label_selector, "a=b");
        assert_eq!(options.field_selector, "x=y");
    }

    #[test]
    fn list_options_encode_canonically_and_only_what_counts() {
        let options = ListOptions::parse(&query(
            "watch=yes&labelSelector=a%3Db&limit=%2B5&sendInitialEvents=0&unknown=1&continue=",
        ))
        .unwrap();
        let mut out = Pairs::new();
        options.encode(&mut out);
        assert_eq!(
            out,
            [
                ("labelSelector", "a=b"),
                ("watch", "true"),
                ("limit", "5"),
                ("sendInitialEvents", "false"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string()))
        );
    }

    #[test]
    fn delete_options_become_one_body() {
        let options = DeleteOptions::parse(&query(
            "gracePeriodSeconds=0&propagationPolicy=Foreground&dryRun=All&uid=u1",
        ))
        .unwrap();
        assert_eq!(
            options.to_json(),
            serde_json::json!({"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1",
                "gracePeriodSeconds": 0, "preconditions": {"uid": "u1"},
                "propagationPolicy": "Foreground", "dryRun": ["All"]})
        );
        assert!(DeleteOptions::parse(&query("gracePeriodSeconds=x")).is_err());
    }

    #[test]
    fn table_options_are_checked() {
        assert_eq!(
            TableOptions::parse(&query("includeObject=None"))
                .unwrap()
                .include_object,
            IncludeObject::None
        );
        assert_eq!(
            TableOptions::parse(&query("")).unwrap().include_object,
            IncludeObject::Metadata
        );
        let error = TableOptions::parse(&query("includeObject=none")).unwrap_err();
        assert_eq!(
            error.message,
            "Unable to convert to Table as requested: includeObject: Invalid value: \"none\": must be 'Metadata', 'Object', 'None', or empty"
        );
    }

    #[test]
    fn export_is_refused_on_gets() {
        assert!(GetOptions::parse(&query("export=true")).is_err());
        assert!(GetOptions::parse(&query("export=0")).is_ok());
    }

    #[test]
    fn pretty_follows_the_query_then_the_user_agent() {
        assert!(pretty(&query("pretty=1"), None));
        assert!(!pretty(&query("pretty=yes"), Some("curl/8")));
        assert!(pretty(&query(""), Some("curl/8.1")));
        assert!(!pretty(&query(""), Some("kubectl/v1.33")));
    }

    #[test]
    fn durations_parse_as_gos() {
        assert_eq!(go_duration("5s"), Ok(std::time::Duration::from_secs(5)));
        assert_eq!(
            go_duration("1h30m"),
            Ok(std::time::Duration::from_secs(5400))
        );
        assert_eq!(
            go_duration("1.5s"),
            Ok(std::time::Duration::from_millis(1500))
        );
        assert_eq!(go_duration("0"), Ok(std::time::Duration::ZERO));
        for (text, error) in [
            ("x", r#"time: invalid duration "x""#),
            ("", r#"time: invalid duration """#),
            ("10", r#"time: missing unit in duration "10""#),
            ("10x", r#"time: unknown unit "x" in duration "10x""#),
            (".s", r#"time: invalid duration ".s""#),
            (
                "5\u{e9}",
                "time: unknown unit \"\\xc3\\xa9\" in duration \"5\\xc3\\xa9\"",
            ),
        ] {
            assert_eq!(go_duration(text).unwrap_err(), error, "{text}");
        }
        let q = Query::parse(Some("timeout=x"));
        assert_eq!(
            timeout(&q).unwrap_err().message,
            r#"invalid timeout specified in the request URL - time: invalid duration "x""#
        );
        assert_eq!(
            timeout(&Query::parse(Some("timeout=5s"))).unwrap(),
            Some("5s".into())
        );
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_queries_never_panic(raw in "\\PC{0,60}") {
            let q = Query::parse(Some(&raw));
            let _ = ListOptions::parse(&q);
            let _ = DeleteOptions::parse(&q);
            let _ = TableOptions::parse(&q);
            let _ = GetOptions::parse(&q);
        }
    }
}
