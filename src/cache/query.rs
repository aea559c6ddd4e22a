//! Which provider LIST and WATCH requests the watch cache may answer, and
//! with what filter. Only what it can answer exactly as kube-apiserver
//! would: a `resourceVersion=0` ("any") or `NotOlderThan` list, whole (no
//! limit or continue); a watch from `0`, from a given version, or a
//! watch-list (`sendInitialEvents`) not older than a version; with label
//! selectors it parses and field selectors on
//! `metadata.name`/`metadata.namespace`. Anything else, including every
//! malformed selector and every consistent (unversioned) read, goes to the
//! provider, which gives the exact answer or error. Pure.

use kube::core::{Expression, Selector, SelectorExt};
use std::collections::{BTreeMap, BTreeSet};

/// A list the cache can answer.
#[derive(Clone, Debug, PartialEq)]
pub struct CacheableList {
    /// The store must be at least this new (0: any).
    pub not_older_than: u64,
    pub labels: Selector,
    pub fields: Vec<FieldTerm>,
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
    /// What the watcher selects (`not_older_than`: for the initial state).
    pub selection: CacheableList,
    pub bookmarks: bool,
    /// A watch-list: the initial events end with a marked bookmark.
    pub initial_events_end: bool,
    /// `timeoutSeconds` (`None`: the server's default).
    pub timeout_seconds: Option<u64>,
}

/// Where a watch begins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchStart {
    /// With the current state as ADDED events (not older than the
    /// selection's `not_older_than`).
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
            selection: CacheableList {
                not_older_than,
                labels: parse_label_selector(get("labelSelector").unwrap_or(""))?,
                fields: parse_field_selector(get("fieldSelector").unwrap_or(""))?,
            },
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

/// The parameters both lists and watches may have.
const KNOWN: [&str; 6] = [
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
        let get = known_values(query, &[])?;
        let version = get("resourceVersion")?;
        let not_older_than = match (version, get("resourceVersionMatch")) {
            ("0", None | Some("NotOlderThan")) => 0,
            (version, Some("NotOlderThan")) => version.parse().ok()?,
            _ => return None,
        };
        let labels = parse_label_selector(get("labelSelector").unwrap_or(""))?;
        let fields = parse_field_selector(get("fieldSelector").unwrap_or(""))?;
        Some(Self {
            not_older_than,
            labels,
            fields,
        })
    }

    /// Whether an object with these coordinates and labels is listed.
    pub fn selects(&self, namespace: &str, name: &str, labels: &BTreeMap<String, String>) -> bool {
        self.labels.matches(labels)
            && self.fields.iter().all(|term| {
                let actual = match term.field {
                    MetadataField::Name => name,
                    MetadataField::Namespace => namespace,
                };
                (actual == term.value) == term.equal
            })
    }
}

/// kube-apiserver's label selector syntax, or `None` for anything this
/// parser is not sure of.
pub fn parse_label_selector(selector: &str) -> Option<Selector> {
    let mut expressions = Vec::new();
    for requirement in split_requirements(selector)? {
        let requirement = requirement.trim();
        if requirement.is_empty() {
            return None;
        }
        expressions.push(parse_requirement(requirement)?);
    }
    Some(Selector::from_iter(expressions))
}

/// Splits on commas outside parentheses; `None` for unbalanced ones.
fn split_requirements(selector: &str) -> Option<Vec<&str>> {
    if selector.trim().is_empty() {
        return Some(Vec::new());
    }
    let (mut depth, mut start, mut parts) = (0usize, 0usize, Vec::new());
    for (i, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.checked_sub(1)?,
            ',' if depth == 0 => {
                parts.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return None;
    }
    parts.push(&selector[start..]);
    Some(parts)
}

fn parse_requirement(requirement: &str) -> Option<Expression> {
    if let Some(key) = requirement.strip_prefix('!') {
        return Some(Expression::DoesNotExist(key_of(key.trim())?));
    }
    for (operator, equal) in [("!=", false), ("==", true), ("=", true)] {
        if let Some((key, value)) = requirement.split_once(operator) {
            let (key, value) = (key_of(key.trim())?, value_of(value.trim())?);
            return Some(if equal {
                Expression::Equal(key, value)
            } else {
                Expression::NotEqual(key, value)
            });
        }
    }
    for (operator, inclusive) in [(" notin ", false), (" in ", true)] {
        if let Some((key, set)) = requirement.split_once(operator) {
            let key = key_of(key.trim())?;
            let set = set.trim().strip_prefix('(')?.strip_suffix(')')?;
            let values: BTreeSet<String> = set
                .split(',')
                .map(|v| value_of(v.trim()))
                .collect::<Option<_>>()?;
            return Some(if inclusive {
                Expression::In(key, values)
            } else {
                Expression::NotIn(key, values)
            });
        }
    }
    Some(Expression::Exists(key_of(requirement)?))
}

/// A label key: optional DNS prefix and `/`, then a name of
/// alphanumerics, `-`, `_`, `.`, beginning and ending alphanumeric.
fn key_of(key: &str) -> Option<String> {
    let name = match key.rsplit_once('/') {
        Some((prefix, name)) => {
            let valid_prefix = !prefix.is_empty()
                && prefix.len() <= 253
                && prefix.split('.').all(crate::route::is_dns_label);
            if !valid_prefix {
                return None;
            }
            name
        }
        None => key,
    };
    (!name.is_empty() && is_label_value(name)).then(|| key.to_string())
}

/// A label value: empty, or up to 63 of alphanumerics, `-`, `_`, `.`,
/// beginning and ending alphanumeric.
fn value_of(value: &str) -> Option<String> {
    is_label_value(value).then(|| value.to_string())
}

fn is_label_value(value: &str) -> bool {
    let bytes = value.as_bytes();
    value.is_empty()
        || (bytes.len() <= 63
            && bytes[0].is_ascii_alphanumeric()
            && bytes[bytes.len() - 1].is_ascii_alphanumeric()
            && bytes
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')))
}

/// `metadata.name`/`metadata.namespace` terms (`=`, `==`, `!=`), or `None`.
fn parse_field_selector(selector: &str) -> Option<Vec<FieldTerm>> {
    if selector.trim().is_empty() {
        return Some(Vec::new());
    }
    selector
        .split(',')
        .map(|term| {
            let (field, value, equal) = if let Some((f, v)) = term.split_once("!=") {
                (f, v, false)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, v, true)
            } else {
                let (f, v) = term.split_once('=')?;
                (f, v, true)
            };
            let field = match field.trim() {
                "metadata.name" => MetadataField::Name,
                "metadata.namespace" => MetadataField::Namespace,
                _ => return None,
            };
            let value = value.trim();
            if value.contains(['=', '!', '\\']) {
                return None;
            }
            Some(FieldTerm {
                field,
                value: value.to_string(),
                equal,
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

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn only_any_and_not_older_than_lists_are_cacheable() {
        assert!(CacheableList::of_query(&query(&[("resourceVersion", "0")])).is_some());
        let newer = CacheableList::of_query(&query(&[
            ("resourceVersion", "42"),
            ("resourceVersionMatch", "NotOlderThan"),
        ]))
        .unwrap();
        assert_eq!(newer.not_older_than, 42);
        for unanswerable in [
            query(&[]),
            query(&[("resourceVersion", "")]),
            query(&[("resourceVersion", "42")]),
            query(&[("resourceVersion", "42"), ("resourceVersionMatch", "Exact")]),
            query(&[("resourceVersion", "0"), ("resourceVersionMatch", "Exact")]),
            query(&[("resourceVersion", "0"), ("limit", "10")]),
            query(&[("resourceVersion", "0"), ("continue", "x")]),
            query(&[("resourceVersion", "0"), ("pretty", "true")]),
            query(&[("resourceVersion", "0"), ("resourceVersion", "0")]),
            query(&[
                ("resourceVersion", "x"),
                ("resourceVersionMatch", "NotOlderThan"),
            ]),
        ] {
            assert_eq!(
                CacheableList::of_query(&unanswerable),
                None,
                "{unanswerable:?}"
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
    fn selectors_it_is_unsure_of_go_to_the_provider() {
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
            "app>1",
        ] {
            assert_eq!(parse_label_selector(selector), None, "{selector:?}");
        }
        for fields in ["spec.x=1", "metadata.name", "metadata.name=a=b"] {
            assert_eq!(parse_field_selector(fields), None, "{fields:?}");
        }
    }

    #[test]
    fn field_selectors_on_name_and_namespace() {
        let list = CacheableList::of_query(&query(&[
            ("resourceVersion", "0"),
            (
                "fieldSelector",
                "metadata.name=a,metadata.namespace!=kube-system",
            ),
        ]))
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
            (
                list.start,
                list.selection.not_older_than,
                list.initial_events_end
            ),
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
        #[test]
        fn arbitrary_watch_queries_never_panic(version in "\\PC{0,12}", selector in "\\PC{0,30}") {
            let _ = CacheableWatch::of_query(&query(&[
                ("watch", "true"),
                ("resourceVersion", &version),
                ("labelSelector", &selector),
            ]));
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
