//! Tables of lists the watch cache answers: the list is taken in the
//! consumer's terms from the cache, as for a JSON list, and rendered into the
//! Table kube-apiserver would give ([`crate::table`]) with the consumer's
//! schema. Whatever it cannot render exactly (a column path it does not
//! evaluate as Go, a Table without headers, v1beta1, protobuf) and every list
//! the cache cannot answer goes to the provider as before.
//!
//! A consistent list waits for the provider to name its objects and
//! versions (the cache's metadata probe). Meanwhile the rows of the objects
//! the cache holds now are made on another thread; when the consistent list
//! holds exactly those items, byte for byte, they are its rows.

use super::Exchange;
use crate::forward::encode::Failure;
use crate::table::{Columns, RawList, rows, table_of_rows};
use crate::translate::request::ProviderRequest;
use crate::wire::accept::{Media, MetaVersion, Target};
use crate::wire::query::IncludeObject;
use futures::future::{Either, select};
use http::Response;
use std::pin::pin;
use std::time::SystemTime;

/// Rows made ahead of a consistent list: the list they were made of, and
/// the rows.
type Guess = (Vec<u8>, Vec<u8>);

impl Exchange<'_> {
    /// The Table of this list rendered from the cache, or `None` to ask the
    /// provider for it.
    pub(super) async fn table_from_cache(
        &self,
        provider: &ProviderRequest,
    ) -> Result<Option<Response<crate::upstream::BoxBody>>, Failure> {
        let Target::Table(MetaVersion::V1) = self.request.output.target else {
            return Ok(None);
        };
        let Ok(options) = &self.request.table else {
            return Ok(None);
        };
        if options.no_headers || self.request.output.media == Media::Protobuf {
            return Ok(None);
        }
        let Ok(columns) = Columns::of(&self.served.spec, &self.resource.version) else {
            return Ok(None);
        };
        let include = options.include_object;
        let now = SystemTime::now();
        // The same list, asked of the cache as a plain JSON list.
        let mut list = provider.clone();
        list.accept = "application/json".into();
        list.query.retain(|(key, _)| key != "includeObject");
        let upstream = self.build(&list)?;
        let current = match current_state(&list) {
            Some(current) => Some(self.build(&current)?),
            None => None,
        };
        let make = || self.translation();
        let consistent = self.proxy.upstream.list_translated(&upstream, &make);
        let (bytes, guess) = match &current {
            None => (consistent.await, None),
            Some(current) => {
                let guessing = async {
                    // Lets the consistent list's probe leave first.
                    tokio::task::yield_now().await;
                    let bytes = self.proxy.upstream.list_translated(current, &make).await?;
                    let columns = columns.clone();
                    tokio::task::spawn_blocking(move || {
                        let made = rows(&columns, &RawList::read(&bytes).ok()?, include, now);
                        Some((bytes, made.ok()?))
                    })
                    .await
                    .ok()
                    .flatten()
                };
                match select(pin!(consistent), pin!(guessing)).await {
                    Either::Left((bytes, _)) => (bytes, None),
                    Either::Right((guess, consistent)) => (consistent.await, guess),
                }
            }
        };
        let Some(bytes) = bytes else {
            return Ok(None);
        };
        let Ok(table) = render(&columns, &bytes, guess, include, now) else {
            return Ok(None);
        };
        // Compact JSON as it is; any other form (YAML, pretty) encoded
        // from it as every answer is.
        self.translated(200, &table, Vec::new()).map(Some)
    }
}

/// The Table of `list`, with the rows guessed ahead when they were made of
/// the same items.
fn render(
    columns: &Columns,
    list: &[u8],
    guess: Option<Guess>,
    include: IncludeObject,
    now: SystemTime,
) -> Result<Vec<u8>, crate::table::jsonpath::Unsupported> {
    let list = RawList::read(list)?;
    if let Some((guessed_list, guessed_rows)) = guess
        && RawList::read(&guessed_list).is_ok_and(|guessed| guessed.same_items(&list))
    {
        return table_of_rows(columns, &list, &guessed_rows);
    }
    table_of_rows(columns, &list, &rows(columns, &list, include, now)?)
}

/// The list of what the cache holds now, for a consistent first page
/// (`resourceVersion` unset, no `continue`): the same request at
/// `resourceVersion=0`. `None` for any other list.
fn current_state(list: &ProviderRequest) -> Option<ProviderRequest> {
    let asks = |key: &str| {
        list.query
            .iter()
            .any(|(k, v)| k == key && (key == "continue" || !v.is_empty()))
    };
    if asks("resourceVersion") || asks("resourceVersionMatch") || asks("continue") {
        return None;
    }
    let mut current = list.clone();
    current
        .query
        .retain(|(key, _)| key != "resourceVersion" && key != "resourceVersionMatch");
    current.query.push(("resourceVersion".into(), "0".into()));
    Some(current)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(query: &[(&str, &str)]) -> ProviderRequest {
        ProviderRequest {
            method: http::Method::GET,
            path: "/apis/db.example.com/v1/namespaces/p/postgresqlinstances".into(),
            query: query
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            accept: "application/json".into(),
            body: None,
        }
    }

    #[test]
    fn only_a_consistent_first_page_is_guessed_from_the_cache() {
        let guessed = current_state(&list(&[("limit", "500"), ("resourceVersion", "")]))
            .expect("a consistent first page");
        assert_eq!(
            guessed.query,
            [
                ("limit".to_string(), "500".to_string()),
                ("resourceVersion".into(), "0".into())
            ]
        );
        assert!(current_state(&list(&[])).is_some());
        for query in [
            [("resourceVersion", "0")],
            [("resourceVersion", "42")],
            [("resourceVersionMatch", "NotOlderThan")],
            [("continue", "")],
            [("continue", "token")],
        ] {
            assert!(current_state(&list(&query)).is_none(), "{query:?}");
        }
    }

    /// A list of one resource, as the cache writes one.
    fn body(version: &str, items: &[(&str, &str)]) -> Vec<u8> {
        let items: Vec<_> = items
            .iter()
            .map(|(name, plan)| {
                serde_json::json!({"metadata": {"name": name, "namespace": "a",
                    "creationTimestamp": "2026-11-26T18:00:00Z"}, "spec": {"plan": plan}})
            })
            .collect();
        serde_json::to_vec(&serde_json::json!({"apiVersion": "db.example.com/v1",
            "items": items, "kind": "PostgreSQLInstanceList",
            "metadata": {"resourceVersion": version}}))
        .unwrap()
    }

    fn columns() -> Columns {
        let spec = serde_json::from_value(serde_json::json!({
            "group": "db.example.com", "scope": "Namespaced",
            "names": {"plural": "postgresqlinstances", "kind": "PostgreSQLInstance"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "additionalPrinterColumns": [{"name": "Plan", "type": "string", "jsonPath": ".spec.plan"}]}],
        }))
        .unwrap();
        Columns::of(&spec, "v1").unwrap()
    }

    #[test]
    fn guessed_rows_are_used_only_for_the_same_items() {
        let columns = columns();
        let now = SystemTime::now();
        let consistent = body("20", &[("w1", "small"), ("w2", "large")]);
        let whole =
            crate::table::table(&columns, &consistent, IncludeObject::Metadata, now).unwrap();
        let guess_of = |list: &[u8]| {
            let rows = rows(
                &columns,
                &RawList::read(list).unwrap(),
                IncludeObject::Metadata,
                now,
            );
            Some((list.to_vec(), rows.unwrap()))
        };
        // The cache's list at its own version, with the same items: the
        // guessed rows, the consistent list's version.
        let same = body("12", &[("w1", "small"), ("w2", "large")]);
        let rendered = render(
            &columns,
            &consistent,
            guess_of(&same),
            IncludeObject::Metadata,
            now,
        );
        assert_eq!(rendered.unwrap(), whole);
        for other in [
            body("12", &[("w1", "small"), ("w2", "medium")]),
            body("12", &[("w1", "small")]),
            body("12", &[("w1", "small"), ("w2", "large"), ("w3", "small")]),
        ] {
            // Rows the cache made of other items are not kept.
            let stale = (
                other.clone(),
                b"{\"cells\":[\"stale\"],\"object\":null}".to_vec(),
            );
            let rendered = render(
                &columns,
                &consistent,
                Some(stale),
                IncludeObject::Metadata,
                now,
            )
            .unwrap();
            assert_eq!(rendered, whole);
        }
    }
}
