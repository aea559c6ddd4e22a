//! `/livez`, `/readyz` and `/healthz` as kube-apiserver serves them: each a
//! list of named checks, `?verbose` to list them, `?exclude=<check>` to skip
//! some, `/<endpoint>/<check>` for one. `livez` is only `ping`: a provider
//! outage is nothing a restart of bindery mends. `readyz` adds the provider
//! answering, the catalog synced (`informer-sync`), the watch cache holding
//! every bound resource (`watch-cache`), and `shutdown`, which fails from
//! the moment bindery is asked to stop, so load balancers send no new
//! requests while the open ones drain. `healthz` is `readyz` without
//! `shutdown`, as in kube-apiserver.

use crate::cache::CachedUpstream;
use crate::catalog::watch::SharedCatalog;
use crate::wire::query::Query;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The checks bindery has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    Ping,
    Provider,
    InformerSync,
    WatchCache,
    Shutdown,
}

impl Check {
    pub fn name(self) -> &'static str {
        match self {
            Check::Ping => "ping",
            Check::Provider => "provider",
            Check::InformerSync => "informer-sync",
            Check::WatchCache => "watch-cache",
            Check::Shutdown => "shutdown",
        }
    }
}

/// One of the three health endpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    Livez,
    Readyz,
    Healthz,
}

impl Probe {
    pub fn name(self) -> &'static str {
        match self {
            Probe::Livez => "livez",
            Probe::Readyz => "readyz",
            Probe::Healthz => "healthz",
        }
    }

    /// Its checks, in the order they are listed.
    pub fn checks(self) -> &'static [Check] {
        use Check::*;
        match self {
            Probe::Livez => &[Ping],
            Probe::Readyz => &[Ping, Provider, InformerSync, WatchCache, Shutdown],
            Probe::Healthz => &[Ping, Provider, InformerSync, WatchCache],
        }
    }
}

/// What a health path asks: a probe, and one of its checks or all of them.
/// `None` for a path that is no health endpoint (404).
pub fn parse(path: &str) -> Option<(Probe, Option<Check>)> {
    let mut segments = path.trim_start_matches('/').splitn(2, '/');
    let probe = match segments.next()? {
        "livez" => Probe::Livez,
        "readyz" => Probe::Readyz,
        "healthz" => Probe::Healthz,
        _ => return None,
    };
    match segments.next() {
        None => Some((probe, None)),
        Some(name) => {
            let check = probe.checks().iter().find(|c| c.name() == name)?;
            Some((probe, Some(*check)))
        }
    }
}

/// A check's outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    /// Failed, with the reason (logged; the list says "reason withheld").
    Failed(String),
    Excluded,
}

/// The answer to a probe's root path: its status and text, exactly as
/// kube-apiserver's `handleRootHealth` writes them. `outcomes` are in the
/// probe's order; `unknown` are the excluded names no check has.
pub fn render(probe: Probe, outcomes: &[(Check, Outcome)], query: &Query) -> (u16, String) {
    let mut listing = String::new();
    let mut failed = false;
    for (check, outcome) in outcomes {
        let name = check.name();
        match outcome {
            Outcome::Passed => listing.push_str(&format!("[+]{name} ok\n")),
            Outcome::Excluded => listing.push_str(&format!("[+]{name} excluded: ok\n")),
            Outcome::Failed(_) => {
                failed = true;
                listing.push_str(&format!("[-]{name} failed: reason withheld\n"));
            }
        }
    }
    let mut unknown: Vec<String> = excluded(query)
        .into_iter()
        .filter(|name| !probe.checks().iter().any(|c| c.name() == name))
        .collect();
    unknown.sort();
    unknown.dedup();
    if !unknown.is_empty() {
        let quoted: Vec<String> = unknown
            .iter()
            .map(|n| crate::wire::go_quote::go_quote(n))
            .collect();
        listing.push_str(&format!(
            "warn: some health checks cannot be excluded: no matches for {}\n",
            quoted.join(",")
        ));
    }
    let name = probe.name();
    if failed {
        // Written by Go's http.Error, which ends the text with a newline.
        return (500, format!("{listing}{name} check failed\n"));
    }
    if !query.contains("verbose") {
        return (200, "ok".to_string());
    }
    (200, format!("{listing}{name} check passed\n"))
}

/// The answer to one check's path: `ok`, or 500 with its reason.
pub fn render_one(outcome: &Outcome) -> (u16, String) {
    match outcome {
        Outcome::Failed(reason) => (500, format!("internal server error: {reason}\n")),
        _ => (200, "ok".to_string()),
    }
}

/// The checks `?exclude` names.
pub fn excluded(query: &Query) -> Vec<String> {
    query.all("exclude")
}

/// How long a provider probe's answer is reused.
const PROBE_REUSE: Duration = Duration::from_secs(1);
/// How long the provider may take to answer a probe.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// Everything the checks look at.
pub struct Health {
    pub catalog: SharedCatalog,
    /// The watch cache, when bindery runs one.
    pub cache: Option<Arc<CachedUpstream>>,
    pub provider: kube::Client,
    stopping: AtomicBool,
    probed: Mutex<Option<(Instant, Result<(), String>)>>,
}

impl Health {
    pub fn new(
        catalog: SharedCatalog,
        cache: Option<Arc<CachedUpstream>>,
        provider: kube::Client,
    ) -> Self {
        Self {
            catalog,
            cache,
            provider,
            stopping: AtomicBool::new(false),
            probed: Mutex::new(None),
        }
    }

    /// bindery has been asked to stop: `readyz` fails from now on.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
    }

    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// Runs `check`.
    pub async fn run(&self, check: Check) -> Result<(), String> {
        match check {
            Check::Ping => Ok(()),
            Check::Shutdown if self.is_stopping() => Err("process is shutting down".to_string()),
            Check::Shutdown => Ok(()),
            Check::InformerSync if self.catalog.is_synced() => Ok(()),
            Check::InformerSync => Err("the provider's exports have not been listed yet".into()),
            Check::WatchCache => match &self.cache {
                Some(cache) => cache.settled(),
                None => Ok(()),
            },
            Check::Provider => self.probe_provider().await,
        }
    }

    /// Whether the provider answers (its `/version`), remembered briefly.
    async fn probe_provider(&self) -> Result<(), String> {
        if let Some((at, result)) = &*self.probed.lock().unwrap_or_else(|p| p.into_inner())
            && at.elapsed() < PROBE_REUSE
        {
            return result.clone();
        }
        let answer = tokio::time::timeout(PROBE_TIMEOUT, self.provider.apiserver_version()).await;
        let result = match answer {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(error)) => Err(format!("the provider did not answer: {error}")),
            Err(_) => Err(format!(
                "the provider did not answer within {PROBE_TIMEOUT:?}"
            )),
        };
        *self.probed.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((Instant::now(), result.clone()));
        result
    }

    /// The answer to health path `path` with `query`: status and text;
    /// `None` for a path that is no health endpoint.
    pub async fn answer(&self, path: &str, query: &Query) -> Option<(u16, String)> {
        let (probe, one) = parse(path)?;
        if let Some(check) = one {
            let outcome = match self.run(check).await {
                Ok(()) => Outcome::Passed,
                Err(reason) => Outcome::Failed(reason),
            };
            return Some(render_one(&outcome));
        }
        let excluded = excluded(query);
        let mut outcomes = Vec::new();
        for check in probe.checks() {
            let outcome = if excluded.iter().any(|name| name == check.name()) {
                Outcome::Excluded
            } else {
                match self.run(*check).await {
                    Ok(()) => Outcome::Passed,
                    Err(reason) => {
                        tracing::debug!(check = check.name(), %reason, probe = probe.name(), "health check failed");
                        Outcome::Failed(reason)
                    }
                }
            };
            outcomes.push((*check, outcome));
        }
        Some(render(probe, &outcomes, query))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(raw: &str) -> Query {
        Query::parse(Some(raw))
    }

    #[test]
    fn paths_name_a_probe_and_maybe_one_of_its_checks() {
        assert_eq!(parse("/readyz"), Some((Probe::Readyz, None)));
        assert_eq!(parse("/livez"), Some((Probe::Livez, None)));
        assert_eq!(
            parse("/readyz/shutdown"),
            Some((Probe::Readyz, Some(Check::Shutdown)))
        );
        assert_eq!(
            parse("/healthz/informer-sync"),
            Some((Probe::Healthz, Some(Check::InformerSync)))
        );
        assert_eq!(
            parse("/livez/shutdown"),
            None,
            "livez has no shutdown check"
        );
        assert_eq!(parse("/healthz/shutdown"), None);
        assert_eq!(parse("/readyz/"), None);
        assert_eq!(parse("/readyz/nope"), None);
        assert_eq!(parse("/readyzz"), None);
    }

    #[test]
    fn the_root_answers_as_kube_apiserver_does() {
        let passed: Vec<_> = Probe::Readyz
            .checks()
            .iter()
            .map(|c| (*c, Outcome::Passed))
            .collect();
        assert_eq!(
            render(Probe::Readyz, &passed, &query("")),
            (200, "ok".into())
        );
        assert_eq!(
            render(Probe::Readyz, &passed, &query("verbose")),
            (
                200,
                "[+]ping ok\n[+]provider ok\n[+]informer-sync ok\n[+]watch-cache ok\n[+]shutdown ok\nreadyz check passed\n"
                    .into()
            )
        );
        let mut failing = passed.clone();
        failing[4].1 = Outcome::Failed("process is shutting down".into());
        failing[1].1 = Outcome::Excluded;
        // Always verbose on failure; the reason withheld.
        assert_eq!(
            render(Probe::Readyz, &failing, &query("exclude=provider&exclude=etcd&exclude=bogus")),
            (
                500,
                "[+]ping ok\n[+]provider excluded: ok\n[+]informer-sync ok\n[+]watch-cache ok\n[-]shutdown failed: reason withheld\nwarn: some health checks cannot be excluded: no matches for \"bogus\",\"etcd\"\nreadyz check failed\n"
                    .into()
            )
        );
        let live = [(Check::Ping, Outcome::Passed)];
        assert_eq!(
            render(Probe::Livez, &live, &query("verbose=false")),
            (200, "[+]ping ok\nlivez check passed\n".into())
        );
    }

    #[test]
    fn one_check_answers_ok_or_its_reason() {
        assert_eq!(render_one(&Outcome::Passed), (200, "ok".into()));
        assert_eq!(
            render_one(&Outcome::Failed("process is shutting down".into())),
            (
                500,
                "internal server error: process is shutting down\n".into()
            )
        );
    }
}
