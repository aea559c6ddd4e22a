//! The providers' schemas judged against the default's
//! ([`super::schemas`]): each provider's schema of every resource the
//! default provider serves, read from its discovery and OpenAPI v3, when
//! the router starts and again while it runs; a provider whose schema
//! breaks the default's is [`Held`] until it does not.

use super::routes::Routes;
use super::schemas::{Served, breaks};
use crate::status::ApiError;
use http::header::ACCEPT;
use serde_json::Value;
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// Reads `path` of a provider as JSON: `null` when it is not served there
/// (404), an error when it cannot be read.
async fn read(client: &kube::Client, path: String) -> Result<Value, String> {
    let request = http::Request::get(&path)
        .header(ACCEPT, "application/json")
        .body(Vec::new())
        .expect("a GET request builds");
    match client.request::<Value>(request).await {
        Ok(value) => Ok(value),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Value::Null),
        Err(error) => Err(format!("reading {path}: {error}")),
    }
}

/// How each provider's schemas were last judged, in the order of the
/// routes: a provider whose schema breaks the default's, or could not be
/// read, has its requests refused.
#[derive(Clone)]
pub(super) struct Held(Arc<RwLock<Vec<Judged>>>);

impl Held {
    pub(super) fn new(judged: Vec<Judged>) -> Self {
        Self(Arc::new(RwLock::new(judged)))
    }

    /// The refusal of a request to provider `index`, named `name`, if it
    /// is held.
    pub(super) fn refusal(&self, index: usize, name: &str) -> Option<ApiError> {
        let held = self.0.read().unwrap_or_else(|e| e.into_inner());
        let why = held.get(index)?.refusal()?;
        Some(ApiError::unavailable(format!(
            "the provider {name} is not used: {why}"
        )))
    }

    /// Records a judgement, keeping the last one of a provider whose schema
    /// could not be read now but was before; what is refused now, when
    /// that changed.
    fn update(&self, judged: Vec<Judged>) -> Option<Vec<String>> {
        let mut held = self.0.write().unwrap_or_else(|e| e.into_inner());
        let before: Vec<Option<String>> = held.iter().map(Judged::refusal).collect();
        for (kept, new) in held.iter_mut().zip(judged) {
            if matches!(new, Judged::Breaks(_)) || matches!(kept, Judged::Unread(_)) {
                *kept = new;
            }
        }
        let now: Vec<Option<String>> = held.iter().map(Judged::refusal).collect();
        (before != now).then(|| now.into_iter().flatten().collect())
    }
}

/// Judges the providers' schemas again every `every`, for as long as the
/// router runs: a provider whose schema update breaks the default's (or
/// the default's update, its) is held, and served again once it is
/// compatible. A round in which the default's schema cannot be read
/// changes nothing.
pub(super) async fn rejudge(
    routes: Routes,
    providers: Vec<kube::Client>,
    held: Held,
    every: Duration,
    teller: Arc<super::events::Teller>,
) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    loop {
        ticks.tick().await;
        let judged = match judge(&routes, &providers).await {
            Ok(judged) => judged,
            Err(error) => {
                tracing::warn!(%error, "the default provider's schema could not be read; judged again later");
                continue;
            }
        };
        match held.update(judged) {
            Some(refused) if refused.is_empty() => {
                let what = "every provider's schema is compatible with the default provider's";
                tracing::info!("{what}");
                teller.tell(super::events::COMPATIBLE, what).await;
            }
            Some(refused) => {
                let what = refused.join("; ");
                tracing::warn!(refused = %what, "a provider's requests are refused for its schema");
                teller.warn(super::events::HELD, &what).await;
            }
            None => {}
        }
    }
}

/// One group/version as a provider serves it: its discovery and OpenAPI v3.
struct Documents {
    discovery: Value,
    openapi: Value,
}

impl Documents {
    async fn of(client: &kube::Client, group_version: &str) -> Result<Self, String> {
        Ok(Self {
            discovery: read(client, format!("/apis/{group_version}")).await?,
            openapi: read(client, format!("/openapi/v3/apis/{group_version}")).await?,
        })
    }

    /// The resource `name` as served here, if it is.
    fn served<'a>(&'a self, group: &'a str, version: &'a str, name: &str) -> Option<Served<'a>> {
        let resource = self.discovery["resources"]
            .as_array()?
            .iter()
            .find(|r| r["name"] == name)?;
        Some(Served {
            group,
            version,
            kind: resource["kind"].as_str().unwrap_or_default(),
            namespaced: resource["namespaced"] == true,
            openapi: &self.openapi,
        })
    }
}

/// What one provider's schemas were judged to be against the default's.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Judged {
    /// What breaks, in words (empty: one schema; and the default's own).
    Breaks(Vec<String>),
    /// Its schema could not be read: why.
    Unread(String),
}

impl Judged {
    /// Why the provider's requests are refused, if they are.
    fn refusal(&self) -> Option<String> {
        match self {
            Judged::Breaks(reasons) if reasons.is_empty() => None,
            Judged::Breaks(reasons) => Some(format!(
                "its schema is not compatible with the default provider's: {}",
                reasons.join("; ")
            )),
            Judged::Unread(why) => Some(format!("its schema could not be read yet: {why}")),
        }
    }
}

/// Each resource the default provider serves, in every group/version it
/// serves, judged against every other provider's schema of it
/// ([`super::schemas`]), for each provider in the order of `routes`; an
/// error when the default provider's cannot be read.
pub(super) async fn judge(
    routes: &Routes,
    providers: &[kube::Client],
) -> Result<Vec<Judged>, String> {
    let first = &providers[routes.default()];
    let groups = read(first, "/apis".to_string()).await?;
    let versions = groups["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|group| group["versions"].as_array().cloned().unwrap_or_default())
        .filter_map(|version| version["groupVersion"].as_str().map(str::to_string));
    let mut judged = vec![Judged::Breaks(Vec::new()); providers.len()];
    for group_version in versions {
        let theirs_first = Documents::of(first, &group_version).await?;
        for (index, other) in providers.iter().enumerate() {
            let Judged::Breaks(reasons) = &mut judged[index] else {
                continue;
            };
            if index == routes.default() {
                continue;
            }
            match Documents::of(other, &group_version).await {
                Ok(theirs) => reasons.extend(
                    broken(&group_version, &theirs_first, &theirs)
                        .map(|broken| format!("{} serves {broken}", routes.names()[index])),
                ),
                Err(why) => judged[index] = Judged::Unread(why),
            }
        }
    }
    Ok(judged)
}

/// What `theirs` breaks of `first`'s resources of `group_version`:
/// `<resource>.<group> otherwise: <what>`.
fn broken<'a>(
    group_version: &'a str,
    first: &'a Documents,
    theirs: &'a Documents,
) -> impl Iterator<Item = String> + 'a {
    let (group, version) = group_version.split_once('/').unwrap_or(("", group_version));
    let names = first.discovery["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["name"].as_str())
        .filter(|name| !name.contains('/'));
    names.flat_map(move |name| {
        let Some(first_served) = first.served(group, version, name) else {
            return Vec::new();
        };
        // Not served there: judged against no schema, a removed version.
        static NONE: Value = Value::Null;
        let other_served = theirs.served(group, version, name).unwrap_or(Served {
            openapi: &NONE,
            ..first_served
        });
        breaks(&first_served, &other_served)
            .into_iter()
            .map(|broken| format!("{name}.{group} otherwise: {broken}"))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn breaks(reasons: &[&str]) -> Judged {
        Judged::Breaks(reasons.iter().map(|r| r.to_string()).collect())
    }

    #[test]
    fn a_provider_is_refused_while_its_schema_breaks_the_defaults_and_served_after() {
        let held = Held::new(vec![breaks(&[]), breaks(&[])]);
        assert!(held.refusal(1, "west").is_none());
        let refused = held.update(vec![breaks(&[]), breaks(&["west serves a.b otherwise: x"])]);
        assert_eq!(refused, Some(vec!["its schema is not compatible with the default provider's: west serves a.b otherwise: x".to_string()]));
        let error = held.refusal(1, "west").expect("west is held");
        assert_eq!(error.code, 503);
        assert!(
            error.message.contains("the provider west is not used"),
            "{}",
            error.message
        );
        assert!(held.refusal(0, "east").is_none(), "the default is served");
        assert_eq!(
            held.update(vec![breaks(&[]), breaks(&["west serves a.b otherwise: x"])]),
            None,
            "no change"
        );
        assert_eq!(held.update(vec![breaks(&[]), breaks(&[])]), Some(vec![]));
        assert!(held.refusal(1, "west").is_none());
    }

    #[test]
    fn a_schema_that_cannot_be_read_keeps_the_last_judgement_and_refuses_before_the_first() {
        let held = Held::new(vec![breaks(&[]), Judged::Unread("down".into())]);
        let error = held.refusal(1, "west").expect("not judged yet");
        assert!(
            error.message.contains("could not be read yet: down"),
            "{}",
            error.message
        );
        held.update(vec![breaks(&[]), breaks(&[])]);
        assert!(held.refusal(1, "west").is_none());
        assert_eq!(
            held.update(vec![breaks(&[]), Judged::Unread("down".into())]),
            None
        );
        assert!(
            held.refusal(1, "west").is_none(),
            "a read that failed changes nothing"
        );
    }
}
