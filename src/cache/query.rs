//! Which provider LIST and WATCH requests the watch cache may answer, and
//! with what filter, following kube-apiserver's own rules for serving from
//! its watch cache (`k8s.io/apiserver` v1.34, `cacher/delegator.go` and
//! `watch_cache.go`):
//! - consistent lists (no version), whose objects the provider names;
//! - lists at `resourceVersion=0` (the newest state, any `limit` ignored),
//!   not older than a version (`NotOlderThan`, or a version with no match and
//!   no limit), exactly at a version (`Exact`, or a version with a limit),
//!   and the pages after a continue token (exactly at the token's version);
//! - watches from `0`, from a given version, and watch-lists
//!   (`sendInitialEvents`) not older than a version;
//! - with any label selector, and field selectors on
//!   `metadata.name`/`metadata.namespace`, both read as kube-apiserver reads
//!   them ([`crate::wire::selector`]).
//!
//! Anything else, including every malformed selector, token or version,
//! goes to the provider, which gives the exact answer or error. Continue tokens are kube-apiserver's own format, so
//! that a page the cache cannot serve any more can be asked of the provider
//! with the same token. Pure.

use crate::wire::selector;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use std::collections::BTreeSet;

/// What a list or watch selects: labels and metadata fields.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Selection {
    pub labels: LabelSelector,
    pub fields: Vec<FieldTerm>,
}

/// A label selector, as kube-apiserver reads it: every requirement must
/// hold.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LabelSelector(selector::LabelSelector);

impl LabelSelector {
    /// Whether `labels` meet every requirement, as kube-apiserver decides.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.0.matches_with(|key| labels.get(key))
    }

    pub fn selects_all(&self) -> bool {
        self.0.is_empty()
    }
}

/// An object's labels, kept small (a store holds one per object): sorted
/// pairs in one boxed slice.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Labels(Box<[(Box<str>, Box<str>)]>);

impl Labels {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .binary_search_by(|(k, _)| (**k).cmp(key))
            .ok()
            .map(|i| &*self.0[i].1)
    }
}

impl<K: Into<Box<str>>, V: Into<Box<str>>> FromIterator<(K, V)> for Labels {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(pairs: I) -> Self {
        let mut pairs: Vec<(Box<str>, Box<str>)> = pairs
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        pairs.sort();
        pairs.dedup_by(|a, b| a.0 == b.0);
        Self(pairs.into_boxed_slice())
    }
}

/// A list the cache can answer.
#[derive(Clone, Debug, PartialEq)]
pub struct CacheableList {
    pub at: ListAt,
    /// What every object of the list must carry, before anything is
    /// selected: the consumer's identity labels on a list across namespaces.
    pub scope: LabelSelector,
    pub selection: Selection,
    /// At most this many items, then a continue token.
    pub limit: Option<u64>,
    /// The page begins at this object key (see [`ContinueToken`]).
    pub start: Option<String>,
}

/// Which state of the resource a list shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListAt {
    /// The provider's newest: which objects, at which versions, only the
    /// provider can tell (see [`super::metadata_probe`]).
    Consistent,
    /// The newest the cache has, once it is at least this new (0: any).
    NotOlderThan(u64),
    /// The state exactly at this version.
    Exact(u64),
}

/// One `metadata.name` or `metadata.namespace` requirement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldTerm {
    pub field: MetadataField,
    pub value: String,
    pub equal: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetadataField {
    Name,
    Namespace,
}

/// A watch the cache can answer.
#[derive(Clone, Debug, PartialEq)]
pub struct CacheableWatch {
    pub start: WatchStart,
    pub selection: Selection,
    /// The initial state must be at least this new (0: any).
    pub not_older_than: u64,
    pub bookmarks: bool,
    /// A watch-list: the initial events end with a marked bookmark.
    pub initial_events_end: bool,
    /// `timeoutSeconds` (`None`: the server's default).
    pub timeout_seconds: Option<u64>,
}

/// Where a watch begins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchStart {
    /// With the current state as ADDED events (not older than
    /// `not_older_than`).
    State,
    /// With the changes after this resourceVersion.
    After(u64),
}

impl CacheableWatch {
    /// Reads a decoded query; `None` when the cache must not answer it.
    pub fn of_query(query: &[(String, String)]) -> Option<Self> {
        let get = known_values(query, &["watch", "sendInitialEvents"])?;
        if !matches!(get("watch"), Some("true" | "1")) {
            return None;
        }
        let bookmarks = match get("allowWatchBookmarks") {
            None | Some("false") => false,
            Some("true") => true,
            Some(_) => return None,
        };
        let version = get("resourceVersion")?;
        let (start, not_older_than, initial_events_end) = match (
            version,
            get("resourceVersionMatch"),
            get("sendInitialEvents"),
        ) {
            ("0", None, None) => (WatchStart::State, 0, false),
            (version, None, None) => (WatchStart::After(positive(version)?), 0, false),
            // A watch-list; kube-apiserver wants bookmarks with it.
            ("0", Some("NotOlderThan"), Some("true")) if bookmarks => (WatchStart::State, 0, true),
            (version, Some("NotOlderThan"), Some("true")) if bookmarks => {
                (WatchStart::State, positive(version)?, true)
            }
            _ => return None,
        };
        let timeout_seconds = match get("timeoutSeconds") {
            None => None,
            Some(seconds) => Some(seconds.parse::<u64>().ok()?).filter(|s| *s > 0),
        };
        Some(Self {
            start,
            selection: Selection::of(get("labelSelector"), get("fieldSelector"))?,
            not_older_than,
            bookmarks,
            initial_events_end,
            timeout_seconds,
        })
    }
}

/// A positive resourceVersion, written as kube-apiserver writes them.
fn positive(version: &str) -> Option<u64> {
    let parsed: u64 = version.parse().ok()?;
    (parsed > 0 && parsed.to_string() == version).then_some(parsed)
}

/// The parameters both lists and watches may have. `timeout` bounds how
/// long the request may take (kubectl's `--request-timeout`), which an
/// answer from the cache keeps.
const KNOWN: [&str; 7] = [
    "timeout",
    "resourceVersion",
    "resourceVersionMatch",
    "labelSelector",
    "fieldSelector",
    "timeoutSeconds",
    "allowWatchBookmarks",
];

/// A lookup of the query's parameters; `None` when one is given twice, or
/// one is neither in [`KNOWN`] nor in `also`.
fn known_values<'q>(
    query: &'q [(String, String)],
    also: &[&str],
) -> Option<impl Fn(&str) -> Option<&'q str> + 'q> {
    let mut seen = BTreeSet::new();
    let acceptable = |k: &str| KNOWN.contains(&k) || also.contains(&k);
    if !query
        .iter()
        .all(|(k, _)| acceptable(k) && seen.insert(k.as_str()))
    {
        return None;
    }
    Some(move |key: &str| {
        query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    })
}

impl CacheableList {
    /// Reads a decoded query; `None` when the cache must not answer it.
    pub fn of_query(query: &[(String, String)]) -> Option<Self> {
        Self::of_scoped_query(query, None)
    }

    /// [`Self::of_query`] for a query whose label selector ends with
    /// `scope` (see [`crate::upstream::CacheRead::identity_scope`]): those requirements
    /// bound the list instead of selecting in it.
    pub fn of_scoped_query(query: &[(String, String)], scope: Option<&str>) -> Option<Self> {
        let get = known_values(query, &["limit", "continue"])?;
        let labels = get("labelSelector").unwrap_or("");
        let (labels, scope) = match scope {
            Some(scope) if labels == scope => ("", scope),
            Some(scope) => match labels.strip_suffix(scope).and_then(|l| l.strip_suffix(',')) {
                Some(selected) => (selected, scope),
                None => (labels, ""),
            },
            None => (labels, ""),
        };
        let limit = match get("limit") {
            None | Some("0") => None,
            Some(limit) => Some(positive(limit)?),
        };
        let version = get("resourceVersion").unwrap_or("");
        let matching = get("resourceVersionMatch");
        let (at, limit, start) = match (get("continue"), version, matching) {
            // A continue token carries the version of its first page; with a
            // version or a match kube-apiserver refuses it.
            (Some(token), "", None) => {
                let token = ContinueToken::decode(token)?;
                (ListAt::Exact(token.version), limit, Some(token.start))
            }
            (Some(_), _, _) => return None,
            (None, "", None) => (ListAt::Consistent, limit, None),
            (None, "", Some(_)) => return None,
            // The newest state, whole: kube-apiserver ignores the limit.
            (None, "0", None | Some("NotOlderThan")) => (ListAt::NotOlderThan(0), None, None),
            (None, version, None) if limit.is_some() => {
                (ListAt::Exact(positive(version)?), limit, None)
            }
            (None, version, None | Some("NotOlderThan")) => {
                (ListAt::NotOlderThan(positive(version)?), limit, None)
            }
            (None, version, Some("Exact")) => (ListAt::Exact(positive(version)?), limit, None),
            (None, _, Some(_)) => return None,
        };
        Some(Self {
            at,
            scope: parse_label_selector(scope)?,
            selection: Selection::of(Some(labels), get("fieldSelector"))?,
            limit,
            start,
        })
    }
}

impl Selection {
    /// The selection of a query's `labelSelector` and `fieldSelector`, or
    /// `None` when kube-apiserver refuses either, or the field selector
    /// names a field other than `metadata.name` and `metadata.namespace`.
    pub fn of(labels: Option<&str>, fields: Option<&str>) -> Option<Self> {
        Some(Self {
            labels: parse_label_selector(labels.unwrap_or(""))?,
            fields: parse_field_selector(fields.unwrap_or(""))?,
        })
    }

    /// Whether an object with these coordinates and labels is selected.
    pub fn selects(&self, namespace: &str, name: &str, labels: &Labels) -> bool {
        self.labels.matches(labels)
            && self.fields.iter().all(|term| {
                let actual = match term.field {
                    MetadataField::Name => name,
                    MetadataField::Namespace => namespace,
                };
                (actual == term.value) == term.equal
            })
    }

    /// Whether it selects everything (kube-apiserver then tells a page's
    /// `remainingItemCount`).
    pub fn is_everything(&self) -> bool {
        self.labels.selects_all() && self.fields.is_empty()
    }
}

/// kube-apiserver's continue token (`k8s.io/apiserver/pkg/storage`,
/// `continue.go`): raw URL-safe base64 of
/// `{"v":"meta.k8s.io/v1","rv":<version>,"start":<key>}`, where `start` is
/// the key the next page begins at, relative to the list's key prefix:
/// `/<name>\0` in a namespace or for a cluster-scoped resource,
/// `/<namespace>/<name>\0` across namespaces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContinueToken {
    pub version: u64,
    pub start: String,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct TokenWire {
    v: String,
    rv: i64,
    start: String,
}

impl ContinueToken {
    /// A token kube-apiserver would accept and read alike; `None` for any
    /// other (the provider then gives its error), and for a negative version
    /// (an inconsistent continuation, which is a consistent read).
    pub fn decode(token: &str) -> Option<Self> {
        let bytes = URL_SAFE_NO_PAD.decode(token).ok()?;
        let wire: TokenWire = serde_json::from_slice(&bytes).ok()?;
        let version = u64::try_from(wire.rv).ok().filter(|v| *v > 0)?;
        // kube-apiserver cleans the key as a path and refuses one that
        // changes; this accepts only keys no cleaning would change.
        let key = wire.start.strip_prefix('/').unwrap_or(&wire.start);
        let clean = !key.is_empty()
            && key
                .split('/')
                .all(|segment| !segment.is_empty() && segment != "." && segment != "..");
        (wire.v == "meta.k8s.io/v1" && clean).then(|| Self {
            version,
            start: key.to_string(),
        })
    }

    /// The token for a page after `last_key` (relative, as [`Self::start`]).
    pub fn after(version: u64, last_key: &str) -> String {
        let wire = TokenWire {
            v: "meta.k8s.io/v1".into(),
            rv: i64::try_from(version).unwrap_or(i64::MAX),
            start: format!("/{last_key}\0"),
        };
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&wire).unwrap_or_default())
    }
}

/// A label selector as kube-apiserver reads it ([`selector::parse_label_selector`]),
/// or `None` for one it refuses (the provider then gives its error).
pub fn parse_label_selector(text: &str) -> Option<LabelSelector> {
    selector::parse_label_selector(text).ok().map(LabelSelector)
}

/// A field selector as kube-apiserver reads it
/// ([`selector::parse_field_selector`]), if all its terms are on
/// `metadata.name` or `metadata.namespace` (keys as written: kube-apiserver
/// does not trim them); `None` otherwise, or for one it refuses.
fn parse_field_selector(text: &str) -> Option<Vec<FieldTerm>> {
    selector::parse_field_selector(text)
        .ok()?
        .terms()
        .iter()
        .map(|term| {
            let field = match term.key.as_str() {
                "metadata.name" => MetadataField::Name,
                "metadata.namespace" => MetadataField::Namespace,
                _ => return None,
            };
            Some(FieldTerm {
                field,
                value: term.value.clone(),
                equal: term.operator.is_equal(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn query(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs.iter().map(|(k, v)| (*k, *v)).collect()
    }

    /// What a list query asks of the cache: (version, limit, start).
    fn asked(pairs: &[(&str, &str)]) -> Option<(ListAt, Option<u64>, Option<String>)> {
        CacheableList::of_query(&query(pairs)).map(|list| (list.at, list.limit, list.start))
    }

    #[test]
    fn a_request_timeout_leaves_a_read_to_the_cache() {
        // kubectl's `--request-timeout` sends `timeout`.
        assert_eq!(
            asked(&[("resourceVersion", "0"), ("timeout", "5s")]),
            Some((ListAt::NotOlderThan(0), None, None))
        );
        let watch = [("watch", "1"), ("resourceVersion", "0"), ("timeout", "5s")];
        assert!(CacheableWatch::of_query(&query(&watch)).is_some());
        assert_eq!(asked(&[("timeout", "5s"), ("timeout", "6s")]), None);
    }

    #[test]
    fn lists_are_read_by_kube_apiservers_version_rules() {
        use ListAt::*;
        let token = ContinueToken::after(77, "ns/w-1");
        let cases = [
            // The newest state, whole, whatever the limit.
            (
                &[("resourceVersion", "0")][..],
                (NotOlderThan(0), None, None),
            ),
            (
                &[("resourceVersion", "0"), ("limit", "10")][..],
                (NotOlderThan(0), None, None),
            ),
            (
                &[
                    ("resourceVersion", "0"),
                    ("resourceVersionMatch", "NotOlderThan"),
                    ("limit", "3"),
                ][..],
                (NotOlderThan(0), None, None),
            ),
            (
                &[
                    ("resourceVersion", "42"),
                    ("resourceVersionMatch", "NotOlderThan"),
                ][..],
                (NotOlderThan(42), None, None),
            ),
            (
                &[
                    ("resourceVersion", "42"),
                    ("resourceVersionMatch", "NotOlderThan"),
                    ("limit", "5"),
                ][..],
                (NotOlderThan(42), Some(5), None),
            ),
            // A version without a match: not older than it, or, with a
            // limit, exactly it (kube-apiserver's legacy rule).
            (
                &[("resourceVersion", "42")][..],
                (NotOlderThan(42), None, None),
            ),
            (
                &[("resourceVersion", "42"), ("limit", "5")][..],
                (Exact(42), Some(5), None),
            ),
            (
                &[("resourceVersion", "42"), ("resourceVersionMatch", "Exact")][..],
                (Exact(42), None, None),
            ),
            (
                &[("limit", "0"), ("resourceVersion", "0")][..],
                (NotOlderThan(0), None, None),
            ),
            // A page after a token: exactly at the token's version.
            (
                &[("limit", "2"), ("continue", token.as_str())][..],
                (Exact(77), Some(2), Some("ns/w-1\0".to_string())),
            ),
        ];
        for (pairs, want) in cases {
            assert_eq!(asked(pairs), Some(want), "{pairs:?}");
        }
        // Consistent: the provider names the objects.
        for consistent in [&[][..], &[("resourceVersion", "")][..]] {
            assert_eq!(asked(consistent), Some((Consistent, None, None)));
        }
        assert_eq!(asked(&[("limit", "5")]), Some((Consistent, Some(5), None)));
        let inconsistent =
            URL_SAFE_NO_PAD.encode(r#"{"v":"meta.k8s.io/v1","rv":-1,"start":"/a\u0000"}"#);
        for unanswerable in [
            // Errors kube-apiserver words.
            &[("resourceVersion", "0"), ("resourceVersionMatch", "Exact")][..],
            &[("resourceVersionMatch", "NotOlderThan")][..],
            &[
                ("resourceVersion", "42"),
                ("resourceVersionMatch", "Newest"),
            ][..],
            &[("resourceVersion", "5"), ("continue", token.as_str())][..],
            &[("resourceVersion", "0"), ("limit", "-1")][..],
            &[("resourceVersion", "0"), ("limit", "ten")][..],
            &[("continue", "abc$")][..],
            &[("continue", inconsistent.as_str())][..],
            &[
                ("resourceVersion", "x"),
                ("resourceVersionMatch", "NotOlderThan"),
            ][..],
            &[("resourceVersion", "042")][..],
            &[("resourceVersion", "0"), ("pretty", "true")][..],
            &[("resourceVersion", "0"), ("resourceVersion", "0")][..],
        ] {
            assert_eq!(asked(unanswerable), None, "{unanswerable:?}");
        }
    }

    #[test]
    fn identity_labels_bindery_added_bound_the_list() {
        let scoped = |selector: &str| {
            let list = CacheableList::of_scoped_query(
                &query(&[("resourceVersion", "0"), ("labelSelector", selector)]),
                Some("bindery.dev/export=e1,bindery.dev/consumer=c1"),
            )
            .unwrap();
            (
                list.scope.selects_all(),
                list.selection.is_everything(),
                list.selection.labels.matches(&labels(&[("tier", "db")])),
            )
        };
        assert_eq!(
            scoped("bindery.dev/export=e1,bindery.dev/consumer=c1"),
            (false, true, true),
            "only the scope: everything in it is selected"
        );
        assert_eq!(
            scoped("tier=db,bindery.dev/export=e1,bindery.dev/consumer=c1"),
            (false, false, true)
        );
        assert_eq!(
            scoped("tier=web,bindery.dev/export=e1,bindery.dev/consumer=c1"),
            (false, false, false)
        );
        // Not the form bindery writes: all of it selects, nothing bounds.
        assert_eq!(scoped("tier=db"), (true, false, true));
    }

    #[test]
    fn continue_tokens_are_kube_apiservers() {
        // A token kube-apiserver v1.34 gave for a page of namespace `load`.
        let theirs =
            "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTAyNzAsInN0YXJ0IjoiL3ctMDAwMDFcdTAwMDAifQ";
        let token = ContinueToken::decode(theirs).expect("kube-apiserver's token reads");
        assert_eq!(token.version, 10270);
        assert_eq!(token.start, "w-00001\0");
        assert_eq!(
            ContinueToken::after(10270, "w-00001"),
            theirs,
            "and is written alike"
        );
        for refused in [
            r#"{"v":"meta.k8s.io/v2","rv":5,"start":"/a\u0000"}"#,
            r#"{"v":"meta.k8s.io/v1","rv":0,"start":"/a\u0000"}"#,
            r#"{"v":"meta.k8s.io/v1","rv":5,"start":""}"#,
            r#"{"v":"meta.k8s.io/v1","rv":5,"start":"/a/../b"}"#,
            r#"{"v":"meta.k8s.io/v1","rv":5,"start":"/a//b"}"#,
            r#"{"v":"meta.k8s.io/v1","rv":5,"start":"/a/"}"#,
            r#"{"v":"meta.k8s.io/v1","rv":"5","start":"/a"}"#,
        ] {
            assert_eq!(
                ContinueToken::decode(&URL_SAFE_NO_PAD.encode(refused)),
                None,
                "{refused}"
            );
        }
    }

    #[test]
    fn label_selectors_match_as_kube_apiserver_evaluates_them() {
        let cases = [
            ("app=db", &[("app", "db")][..], true),
            ("app==db", &[("app", "db")][..], true),
            ("app!=db", &[][..], true),
            ("app!=db", &[("app", "db")][..], false),
            ("app in (db, web)", &[("app", "web")][..], true),
            ("app notin (db,web)", &[("app", "x")][..], true),
            ("app notin (db,web)", &[][..], true),
            ("app", &[("app", "")][..], true),
            ("!app", &[("app", "")][..], false),
            (
                "example.com/tier=a,app=db",
                &[("example.com/tier", "a"), ("app", "db")][..],
                true,
            ),
            (
                "example.com/tier=a,app=db",
                &[("example.com/tier", "a")][..],
                false,
            ),
            ("app=", &[("app", "")][..], true),
        ];
        for (selector, on, want) in cases {
            let parsed =
                parse_label_selector(selector).unwrap_or_else(|| panic!("{selector} should parse"));
            assert_eq!(parsed.matches(&labels(on)), want, "{selector} on {on:?}");
        }
    }

    #[test]
    fn selectors_kube_apiserver_refuses_go_to_the_provider() {
        for selector in [
            "app=(db",
            "app in db",
            ",",
            "app=db,",
            "-app=db",
            "app=db-",
            "a b=c",
            "app in ()x",
            "app=d b",
            "/app=db",
        ] {
            assert_eq!(parse_label_selector(selector), None, "{selector:?}");
        }
        for fields in [
            "spec.x=1",
            "metadata.name",
            "metadata.name=a=b",
            // kube-apiserver does not trim keys: another field.
            " metadata.name=a",
        ] {
            assert_eq!(parse_field_selector(fields), None, "{fields:?}");
        }
    }

    /// Selectors the cache used to leave to the provider, now read as
    /// kube-apiserver reads them.
    #[test]
    fn selectors_are_read_exactly() {
        let gt = parse_label_selector("app>1").unwrap();
        assert!(gt.matches(&labels(&[("app", "2")])));
        assert!(!gt.matches(&labels(&[("app", "1")])));
        assert!(!gt.matches(&labels(&[("app", "x")])));
        let lt = parse_label_selector("app < 10").unwrap();
        assert!(lt.matches(&labels(&[("app", "-3")])));
        let fields = Selection::of(None, Some("metadata.name=a\\,b!,metadata.name=,=")).unwrap();
        assert_eq!(
            fields.fields,
            [
                FieldTerm {
                    field: MetadataField::Name,
                    value: String::new(),
                    equal: true
                },
                FieldTerm {
                    field: MetadataField::Name,
                    value: "a,b!".into(),
                    equal: true
                },
            ],
            "escapes undone, a term with no key and no value dropped"
        );
        assert_eq!(
            parse_field_selector("metadata.namespace= x ").unwrap()[0].value,
            " x ",
            "values are not trimmed"
        );
    }

    #[test]
    fn field_selectors_on_name_and_namespace() {
        let list = Selection::of(
            None,
            Some("metadata.name=a,metadata.namespace!=kube-system"),
        )
        .unwrap();
        let none = labels(&[]);
        assert!(list.selects("default", "a", &none));
        assert!(!list.selects("kube-system", "a", &none));
        assert!(!list.selects("default", "b", &none));
    }

    #[test]
    fn watches_from_zero_from_a_version_and_watch_lists_are_cacheable() {
        let watch = |pairs: &[(&str, &str)]| {
            let mut pairs = pairs.to_vec();
            pairs.push(("watch", "true"));
            CacheableWatch::of_query(&query(&pairs))
        };
        let zero = watch(&[("resourceVersion", "0")]).unwrap();
        assert_eq!(
            (zero.start, zero.initial_events_end),
            (WatchStart::State, false)
        );
        let after = watch(&[
            ("resourceVersion", "42"),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", "30"),
        ])
        .unwrap();
        assert_eq!(after.start, WatchStart::After(42));
        assert!(after.bookmarks);
        assert_eq!(after.timeout_seconds, Some(30));
        let list = watch(&[
            ("resourceVersion", "42"),
            ("resourceVersionMatch", "NotOlderThan"),
            ("sendInitialEvents", "true"),
            ("allowWatchBookmarks", "true"),
            ("labelSelector", "app=db"),
        ])
        .unwrap();
        assert_eq!(
            (list.start, list.not_older_than, list.initial_events_end),
            (WatchStart::State, 42, true)
        );
        for unanswerable in [
            // Consistent: from the provider's newest version.
            &[][..],
            &[("resourceVersion", "")][..],
            &[
                ("resourceVersionMatch", "NotOlderThan"),
                ("sendInitialEvents", "true"),
                ("allowWatchBookmarks", "true"),
            ][..],
            // Invalid for kube-apiserver: it gives the error.
            &[
                ("resourceVersion", "0"),
                ("resourceVersionMatch", "NotOlderThan"),
            ][..],
            &[
                ("resourceVersion", "0"),
                ("sendInitialEvents", "true"),
                ("resourceVersionMatch", "NotOlderThan"),
            ][..],
            &[
                ("resourceVersion", "0"),
                ("sendInitialEvents", "false"),
                ("resourceVersionMatch", "NotOlderThan"),
                ("allowWatchBookmarks", "true"),
            ][..],
            &[("resourceVersion", "x")][..],
            &[("resourceVersion", "042")][..],
            &[("resourceVersion", "0"), ("timeoutSeconds", "-1")][..],
            &[("resourceVersion", "0"), ("allowWatchBookmarks", "yes")][..],
            &[("resourceVersion", "0"), ("limit", "5")][..],
            &[("resourceVersion", "0"), ("continue", "x")][..],
            &[("resourceVersion", "0"), ("labelSelector", "app=(")][..],
        ] {
            assert_eq!(watch(unanswerable), None, "{unanswerable:?}");
        }
        assert_eq!(
            CacheableWatch::of_query(&query(&[("resourceVersion", "0")])),
            None,
            "not a watch"
        );
        assert_eq!(
            CacheableWatch::of_query(&query(&[
                ("watch", "true"),
                ("resourceVersion", "0"),
                ("resourceVersion", "1")
            ])),
            None,
            "a parameter given twice"
        );
    }

    proptest! {
        /// Selectors match exactly as kube's own evaluation of the same
        /// requirements does.
        #[test]
        fn label_selectors_match_as_kubes_selector(
            requirements in proptest::collection::vec(
                ("[ab]", "[xy]?", 0..6usize), 0..4),
            on in proptest::collection::btree_map("[abc]", "[xyz]?", 0..3),
        ) {
            use kube::core::{Selector, SelectorExt};
            let selector = requirements
                .iter()
                .map(|(key, value, op)| match op {
                    0 => format!("{key}={value}"),
                    1 => format!("{key}!={value}"),
                    2 => format!("{key} in ({value},z)"),
                    3 => format!("{key} notin ({value},z)"),
                    4 => key.to_string(),
                    _ => format!("!{key}"),
                })
                .collect::<Vec<_>>()
                .join(",");
            let ours = parse_label_selector(&selector).expect("a selector this parser reads");
            let kubes = Selector::from_iter(ours.0.requirements().iter().map(|r| {
                use kube::core::Expression;
                use selector::Operator::*;
                let (key, values) = (r.key().to_string(), r.values());
                match r.operator() {
                    Equals | DoubleEquals => Expression::Equal(key, values[0].clone()),
                    NotEquals => Expression::NotEqual(key, values[0].clone()),
                    In => Expression::In(key, values.iter().cloned().collect()),
                    NotIn => Expression::NotIn(key, values.iter().cloned().collect()),
                    Exists => Expression::Exists(key),
                    DoesNotExist => Expression::DoesNotExist(key),
                    GreaterThan | LessThan => unreachable!("not generated"),
                }
            }));
            let labels: Labels = on.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            prop_assert_eq!(ours.matches(&labels), kubes.matches(&on), "{} on {:?}", selector, on);
        }

        #[test]
        fn arbitrary_watch_queries_never_panic(version in "\\PC{0,12}", selector in "\\PC{0,30}") {
            let _ = CacheableWatch::of_query(&query(&[
                ("watch", "true"),
                ("resourceVersion", &version),
                ("labelSelector", &selector),
            ]));
        }

        #[test]
        fn arbitrary_tokens_never_panic(token in "\\PC{0,60}", bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = ContinueToken::decode(&token);
            let _ = ContinueToken::decode(&URL_SAFE_NO_PAD.encode(&bytes));
        }

        #[test]
        fn arbitrary_queries_never_panic(selector in "\\PC{0,40}", fields in "\\PC{0,30}") {
            let _ = CacheableList::of_query(&query(&[
                ("resourceVersion", "0"),
                ("labelSelector", &selector),
                ("fieldSelector", &fields),
            ]));
        }
    }
}
