//! Paging a list across providers (pure). A page of `limit` entries is the
//! first `limit` of every provider's next entries, in list order; the
//! continue token the client gets holds the merged resourceVersion the
//! first page was read at and, per provider, where its next entries start:
//! its own continue token (or its start, at that version), and how many
//! entries from there were given already. Each provider is asked for
//! `skip + limit` entries from there and the first `skip` left out, so every
//! page is read at the first page's versions, and no entry is missed or
//! given twice. When `skip` reaches `limit`, the next page first asks for a
//! continue token just past those `skip` entries ([`Cursor::needs_token`]),
//! so that what is asked again stays bounded.

use super::version::{Asked, Versions};
use crate::status::ApiError;
use base64::Engine;
use serde::{Deserialize, Serialize};

/// Where one provider's next entries start.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    /// The provider's continue token; `None`: its list's start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    /// How many entries from there were given already.
    #[serde(default)]
    pub skip: usize,
    /// Every entry was given.
    #[serde(default)]
    pub done: bool,
}

impl Cursor {
    /// Whether the cursor should first be moved to a token past its `skip`
    /// entries, before a page of `limit` is asked.
    pub fn needs_token(&self, limit: usize) -> bool {
        !self.done && self.skip >= limit.max(1)
    }
}

/// What a merged list's continue token holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Continue {
    /// The merged resourceVersion of the first page.
    pub version: String,
    pub cursors: Vec<Cursor>,
}

impl Continue {
    /// The token a client is given.
    pub fn encode(&self) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
    }

    /// The token `text` for `providers` providers; kube-apiserver's 400 for
    /// one the router did not give.
    pub fn decode(text: &str, providers: usize) -> Result<Self, ApiError> {
        let invalid =
            || ApiError::bad_request("continue key is not valid: not one the router gave");
        let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(text)
            .map_err(|_| invalid())?;
        let token: Continue = serde_json::from_slice(&json).map_err(|_| invalid())?;
        if token.cursors.len() != providers
            || super::version::Versions::parse(&token.version, providers).is_none()
        {
            return Err(invalid());
        }
        Ok(token)
    }
}

/// The versions a page is read at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Start {
    /// The first page: as the client asked.
    Asked(Asked),
    /// A later page: exactly the first page's versions.
    At(Versions),
}

/// Where a page starts: a first page (no `token`) at the `resourceVersion`
/// asked, or the cursors and versions `token` holds; kube-apiserver's 400
/// for a version beside a token, or a token the router did not give.
pub fn start_of(
    token: &str,
    (asked_version, matching): (&str, &str),
    providers: usize,
) -> Result<(Vec<Cursor>, Start), ApiError> {
    if token.is_empty() {
        let asked = Asked::for_list(asked_version, matching, providers)?;
        return Ok((vec![Cursor::default(); providers], Start::Asked(asked)));
    }
    if !asked_version.is_empty() {
        return Err(ApiError::bad_request(
            "specifying resource version is not allowed when using continue",
        ));
    }
    let token = Continue::decode(token, providers)?;
    let versions = Versions::parse(&token.version, providers)
        .ok_or_else(|| ApiError::bad_request("continue key is not valid"))?;
    Ok((token.cursors, Start::At(versions)))
}

/// The query provider `index` is asked with for `count` entries (`None`:
/// all) from `cursor`: the client's query `raw` without its paging and
/// versions, then the cursor's token, or the list's start at the page's
/// versions (exactly the first page's, after the first).
pub fn query_for(
    raw: &str,
    index: usize,
    cursor: &Cursor,
    start: &Start,
    count: Option<usize>,
) -> String {
    let mut query = form_urlencoded::Serializer::new(String::new());
    let pairs = || form_urlencoded::parse(raw.as_bytes());
    for (key, value) in pairs() {
        if !matches!(
            &*key,
            "limit" | "continue" | "resourceVersion" | "resourceVersionMatch"
        ) {
            query.append_pair(&key, &value);
        }
    }
    match (&cursor.after, start) {
        (Some(after), _) => {
            query.append_pair("continue", after);
        }
        (None, Start::At(versions)) => {
            query.append_pair("resourceVersion", versions.of(index));
            query.append_pair("resourceVersionMatch", "Exact");
        }
        (None, Start::Asked(asked)) if !asked.of(index).is_empty() => {
            query.append_pair("resourceVersion", asked.of(index));
            if let Some((_, matching)) = pairs().find(|(k, _)| k == "resourceVersionMatch") {
                query.append_pair("resourceVersionMatch", &matching);
            }
        }
        // The most recent state: no version, and so no match.
        (None, Start::Asked(_)) => {}
    }
    if let Some(count) = count.filter(|c| *c < usize::MAX / 2) {
        query.append_pair("limit", &count.to_string());
    }
    query.finish()
}

/// The cursor after asking for `cursor.skip` entries from it, whose answer
/// continues with `next`: just past them.
pub fn past(cursor: &Cursor, next: Option<&str>) -> Cursor {
    match next.filter(|next| !next.is_empty()) {
        Some(next) => Cursor {
            after: Some(next.to_string()),
            skip: 0,
            done: false,
        },
        None => Cursor {
            done: true,
            ..cursor.clone()
        },
    }
}

/// One provider's answer to a page's request: how many entries it gave
/// after its cursor's `skip` (`given`), its continue token, and how many
/// entries it has after them (its `remainingItemCount`, when it counts).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Batch {
    pub given: usize,
    pub next: Option<String>,
    pub remaining: Option<u64>,
}

/// The providers' answers to a page's requests, read.
pub struct Read {
    /// The first answer, emptied of its entries: the page's envelope.
    pub envelope: Option<serde_json::Value>,
    /// Where the answers keep their entries (`items`, or a Table's `rows`).
    pub field: &'static str,
    /// Each provider's entries after its cursor's `skip`, with its place.
    pub tagged: Vec<(usize, serde_json::Value)>,
    pub batches: Vec<Option<Batch>>,
    /// The page's versions.
    pub versions: Versions,
}

/// Reads each provider's answer (`None`: not asked, its cursor done) to a
/// page started at `start` from `cursors`.
pub fn read(
    answers: Vec<Option<serde_json::Value>>,
    cursors: &[Cursor],
    start: &Start,
) -> Result<Read, ApiError> {
    let mut read = Read {
        envelope: None,
        field: "items",
        tagged: Vec::new(),
        batches: Vec::with_capacity(answers.len()),
        versions: match start {
            Start::At(versions) => versions.clone(),
            Start::Asked(_) => Versions::all("0", answers.len()),
        },
    };
    for (index, answer) in answers.into_iter().enumerate() {
        let Some(mut list) = answer else {
            read.batches.push(None);
            continue;
        };
        if matches!(start, Start::Asked(_)) {
            let version = list["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default();
            read.versions.advance(index, version);
        }
        let (field, entries) = super::merge::entries(&mut list)?;
        read.field = field;
        let next = list["metadata"]["continue"]
            .as_str()
            .filter(|c| !c.is_empty())
            .map(str::to_string);
        let skip = cursors.get(index).map_or(0, |c| c.skip);
        let given: Vec<serde_json::Value> = entries.into_iter().skip(skip).collect();
        let remaining = list["metadata"]["remainingItemCount"].as_u64();
        read.batches.push(Some(Batch {
            given: given.len(),
            next,
            remaining,
        }));
        read.tagged
            .extend(given.into_iter().map(|entry| (index, entry)));
        read.envelope.get_or_insert(list);
    }
    Ok(read)
}

/// The cursors after a page that took `taken[i]` of provider `i`'s `batches`
/// (`None`: a provider not asked, its cursor done).
pub fn next_cursors(cursors: &[Cursor], batches: &[Option<Batch>], taken: &[usize]) -> Vec<Cursor> {
    cursors
        .iter()
        .zip(batches)
        .zip(taken)
        .map(|((cursor, batch), taken)| match batch {
            None => cursor.clone(),
            Some(batch) if *taken == batch.given => match &batch.next {
                Some(next) => Cursor {
                    after: Some(next.clone()),
                    skip: 0,
                    done: false,
                },
                None => Cursor {
                    done: true,
                    ..cursor.clone()
                },
            },
            Some(_) => Cursor {
                skip: cursor.skip + taken,
                ..cursor.clone()
            },
        })
        .collect()
}

/// How many entries come after a page that took `taken[i]` of provider
/// `i`'s `batches`, as kube-apiserver's `remainingItemCount` counts them:
/// those given and not taken, and those after each provider's batch;
/// `None` when a provider with more does not count them (a list with a
/// selector, which kube-apiserver does not count either).
pub fn remaining(batches: &[Option<Batch>], taken: &[usize]) -> Option<u64> {
    let mut total = 0u64;
    for (batch, taken) in batches.iter().zip(taken) {
        let Some(batch) = batch else {
            continue;
        };
        let after = match &batch.next {
            Some(_) => batch.remaining?,
            None => 0,
        };
        total += batch.given.saturating_sub(*taken) as u64 + after;
    }
    Some(total)
}

/// The first `limit` of `tagged` entries (each with its provider) that are
/// `shown`, in list order by `key`, and how many of each provider's were
/// passed (those not shown before the page's end count: they are behind).
/// A provider with `more` entries than it gave bounds the page: nothing
/// after its last entry given can be placed yet (its next ones may come
/// first); one that gave none while it has more leaves the page empty.
pub fn first<T, K: Ord + Clone>(
    mut tagged: Vec<(usize, T)>,
    limit: usize,
    more: &[bool],
    key: impl Fn(&T) -> K,
    shown: impl Fn(usize, &T) -> bool,
) -> (Vec<T>, Vec<usize>) {
    let mut last: Vec<Option<K>> = vec![None; more.len()];
    for (index, entry) in &tagged {
        let k = key(entry);
        if let Some(slot) = last.get_mut(*index)
            && slot.as_ref().is_none_or(|l| k > *l)
        {
            *slot = Some(k);
        }
    }
    let mut bound: Option<Option<K>> = None;
    for (index, has_more) in more.iter().enumerate() {
        if *has_more {
            let end = last[index].clone();
            bound = Some(match bound {
                None => end,
                Some(None) => None,
                Some(Some(b)) => end.map(|e| if e < b { e } else { b }),
            });
        }
    }
    // A key may be made for each entry (an allocation): once each.
    tagged.sort_by_cached_key(|(_, entry)| key(entry));
    let mut taken = vec![0; more.len()];
    let mut page = Vec::new();
    for (index, entry) in tagged {
        match &bound {
            Some(None) => break,
            Some(Some(bound)) if key(&entry) > *bound => break,
            _ => {}
        }
        let visible = shown(index, &entry);
        if visible && page.len() == limit {
            break;
        }
        if let Some(count) = taken.get_mut(index) {
            *count += 1;
        }
        if visible {
            page.push(entry);
        }
    }
    (page, taken)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_token_reads_back_as_given_and_others_are_refused() {
        let token = Continue {
            version: "4.9".into(),
            cursors: vec![
                Cursor {
                    after: Some("abc".into()),
                    skip: 0,
                    done: false,
                },
                Cursor {
                    after: None,
                    skip: 3,
                    done: false,
                },
            ],
        };
        assert_eq!(Continue::decode(&token.encode(), 2), Ok(token.clone()));
        for bad in ["", "%%", "e30", &token.encode()[1..]] {
            let error = Continue::decode(bad, 2).expect_err(bad);
            assert_eq!(error.code, 400, "{bad}");
        }
        assert!(
            Continue::decode(&token.encode(), 3).is_err(),
            "another router's"
        );
    }

    #[test]
    fn a_page_asks_each_provider_from_its_cursor_at_the_pages_versions() {
        let raw = "labelSelector=a%3Db&limit=2&resourceVersion=0&resourceVersionMatch=NotOlderThan";
        let first = Start::Asked(Asked::Any);
        assert_eq!(
            query_for(raw, 0, &Cursor::default(), &first, Some(2)),
            "labelSelector=a%3Db&resourceVersion=0&resourceVersionMatch=NotOlderThan&limit=2"
        );
        let later = Start::At(Versions::parse("5.9", 2).expect("versions"));
        assert_eq!(
            query_for(raw, 1, &Cursor::default(), &later, None),
            "labelSelector=a%3Db&resourceVersion=9&resourceVersionMatch=Exact"
        );
        let token = Cursor {
            after: Some("t".into()),
            skip: 1,
            done: false,
        };
        assert_eq!(
            query_for("", 1, &token, &later, Some(3)),
            "continue=t&limit=3"
        );
        assert_eq!(
            past(&token, Some("u")),
            Cursor {
                after: Some("u".into()),
                skip: 0,
                done: false
            }
        );
        assert!(past(&token, None).done);
    }

    #[test]
    fn a_page_starts_from_the_token_or_the_version_asked() {
        let (cursors, start) = start_of("", ("", ""), 2).expect("a first page");
        assert_eq!((cursors.len(), start), (2, Start::Asked(Asked::Latest)));
        let token = Continue {
            version: "1.2".into(),
            cursors: vec![Cursor::default(); 2],
        };
        let (_, start) = start_of(&token.encode(), ("", ""), 2).expect("a later page");
        assert_eq!(
            start,
            Start::At(Versions::parse("1.2", 2).expect("versions"))
        );
        assert_eq!(
            start_of(&token.encode(), ("7", ""), 2)
                .expect_err("both")
                .code,
            400
        );
        assert_eq!(
            start_of("", ("77", "Exact"), 2)
                .expect_err("exactly at a provider's own")
                .code,
            410
        );
        // Not older than a provider's own: every provider's latest.
        let (_, start) = start_of("", ("77", "NotOlderThan"), 2).expect("a first page");
        assert_eq!(start, Start::Asked(Asked::Latest));
    }

    #[test]
    fn a_provider_whose_batch_was_taken_whole_goes_on_from_its_token() {
        let cursors = vec![Cursor::default(), Cursor::default()];
        let batches = vec![
            Some(Batch {
                given: 2,
                next: Some("t".into()),
                remaining: Some(4),
            }),
            Some(Batch {
                given: 2,
                next: None,
                remaining: None,
            }),
        ];
        let next = next_cursors(&cursors, &batches, &[2, 1]);
        // East's 4 after its batch, and west's one given and not taken.
        assert_eq!(remaining(&batches, &[2, 1]), Some(5));
        let uncounted = [batches[0].clone().map(|b| Batch {
            remaining: None,
            ..b
        })];
        assert_eq!(remaining(&uncounted, &[2]), None);
        assert_eq!(
            next[0],
            Cursor {
                after: Some("t".into()),
                skip: 0,
                done: false
            }
        );
        assert_eq!(
            next[1],
            Cursor {
                after: None,
                skip: 1,
                done: false
            }
        );
        let next = next_cursors(
            &next,
            &[
                None,
                Some(Batch {
                    given: 1,
                    next: None,
                    remaining: None,
                }),
            ],
            &[0, 1],
        );
        assert!(next[1].done);
        assert!(!next[1].needs_token(5));
        assert!(
            Cursor {
                skip: 5,
                ..Cursor::default()
            }
            .needs_token(5)
        );
    }

    proptest! {
        /// Whatever a client sends as a continue token is read without a
        /// panic, and refused unless it is one the router gave.
        #[test]
        fn any_token_is_read_without_panic(text in ".{0,200}", providers in 1usize..4) {
            if let Ok(token) = Continue::decode(&text, providers) {
                prop_assert_eq!(token.cursors.len(), providers);
            }
        }

        /// Paging two sorted lists with any limit gives every entry once,
        /// in order.
        #[test]
        fn pages_give_every_entry_once_in_order(
            mut east in proptest::collection::btree_set(0u32..500, 0..40),
            west in proptest::collection::btree_set(0u32..500, 0..40),
            limit in 1usize..7,
        ) {
            east.retain(|e| !west.contains(e));
            let lists = [east.into_iter().collect::<Vec<_>>(), west.into_iter().collect::<Vec<_>>()];
            // A provider's continue token here is the offset it stands for.
            let mut cursors = vec![Cursor::default(), Cursor::default()];
            let mut seen = Vec::new();
            for _ in 0..200 {
                let mut tagged = Vec::new();
                let mut batches = Vec::new();
                for (index, cursor) in cursors.iter_mut().enumerate() {
                    if cursor.done {
                        batches.push(None);
                        continue;
                    }
                    let start: usize = cursor.after.as_deref().map_or(0, |t| t.parse().unwrap());
                    if cursor.needs_token(limit) {
                        let past = start + cursor.skip;
                        *cursor = Cursor { after: Some(past.to_string()), skip: 0, done: false };
                    }
                    let start: usize = cursor.after.as_deref().map_or(0, |t| t.parse().unwrap());
                    let end = (start + cursor.skip + limit).min(lists[index].len());
                    let from = (start + cursor.skip).min(end);
                    let given = &lists[index][from..end];
                    tagged.extend(given.iter().map(|e| (index, *e)));
                    let next = (end < lists[index].len()).then(|| end.to_string());
                    let remaining = Some((lists[index].len() - end) as u64);
                    batches.push(Some(Batch { given: given.len(), next, remaining }));
                }
                let more: Vec<bool> = batches.iter().map(|b| b.as_ref().is_some_and(|b| b.next.is_some())).collect();
                let (page, taken) = first(tagged, limit, &more, |e| *e, |_, e| e % 7 != 0);
                prop_assert!(page.len() <= limit);
                seen.extend(page);
                let left = remaining(&batches, &taken);
                cursors = next_cursors(&cursors, &batches, &taken);
                // What remains is every provider's entries not yet passed.
                let passed: u64 = cursors.iter().enumerate().map(|(index, cursor)| {
                    if cursor.done {
                        return lists[index].len() as u64;
                    }
                    let start: usize = cursor.after.as_deref().map_or(0, |t| t.parse().unwrap());
                    (start + cursor.skip) as u64
                }).sum();
                let all: u64 = lists.iter().map(|l| l.len() as u64).sum();
                prop_assert_eq!(left, Some(all - passed));
                if cursors.iter().all(|c| c.done) {
                    break;
                }
            }
            let mut all: Vec<u32> = lists.concat().into_iter().filter(|e| e % 7 != 0).collect();
            all.sort();
            prop_assert_eq!(seen, all);
        }
    }
}
