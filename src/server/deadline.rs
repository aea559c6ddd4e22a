//! The request-deadline layer: the `timeout` query parameter read as
//! kube-apiserver's `WithRequestDeadline` filter reads it, before the caller
//! is authenticated and before the path is known to name anything, for
//! every request that is not long-running (a watch, or the `attach`,
//! `exec`, `log`, `portforward` and `proxy` subresources). A value
//! `time.ParseDuration` refuses gets its 400, negotiated as its errors are.
//! bindery's own `/bind` API is not kube-apiserver's and reads no `timeout`.

use super::gate::{Check, GateLayer};
use crate::forward::encode::ErrorForm;
use crate::resolved::{Resolved, resolved_of};
use crate::route::{Endpoint, Verb};
use crate::upstream::BoxBody;
use crate::wire::query;
use futures::future::BoxFuture;
use http::{Request, Response};

/// The subresources kube-apiserver's long-running check names.
const LONG_RUNNING_SUBRESOURCES: [&str; 5] = ["attach", "exec", "proxy", "log", "portforward"];

#[derive(Clone, Copy, Default)]
pub struct Deadline;

pub type DeadlineLayer = GateLayer<Deadline>;

pub fn layer() -> DeadlineLayer {
    GateLayer::new(Deadline)
}

impl Check for Deadline {
    fn check<'a, B: Send + 'a>(
        &'a self,
        request: &'a mut Request<B>,
    ) -> BoxFuture<'a, Result<(), Response<BoxBody>>> {
        let answer = refusal(request);
        Box::pin(async move { answer.map_or(Ok(()), Err) })
    }
}

/// The answer to a request whose `timeout` kube-apiserver would refuse.
fn refusal<B>(request: &mut Request<B>) -> Option<Response<BoxBody>> {
    resolved_of(request);
    let resolved = request.extensions().get::<Resolved>()?;
    if !reads_timeout(resolved) {
        return None;
    }
    let error = query::timeout(&resolved.query).err()?;
    Some(ErrorForm::of(request.headers(), Some(&resolved.query)).error(&error))
}

/// Whether kube-apiserver's deadline filter reads this request's `timeout`:
/// not bindery's own `/bind` API, and not a long-running request
/// (kube-apiserver's `BasicLongRunningRequestCheck`: the verb is `watch`,
/// or the subresource is one of the streaming ones).
pub fn reads_timeout(resolved: &Resolved) -> bool {
    if let Endpoint::Bind(_) = resolved.endpoint {
        return false;
    }
    let streams = resolved
        .resource()
        .and_then(|resource| resource.subresource.as_deref())
        .is_some_and(|s| LONG_RUNNING_SUBRESOURCES.contains(&s));
    resolved.verb != Some(Verb::Watch) && !streams
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reads(method: &str, target: &str) -> bool {
        reads_timeout(&Resolved::of(
            &method.parse().unwrap(),
            &target.parse().unwrap(),
        ))
    }

    #[test]
    fn everything_but_long_running_requests_and_bind_reads_timeout() {
        let widgets = "/clusters/c1/apis/g/v1/namespaces/n/widgets";
        assert!(reads("GET", widgets));
        assert!(reads("POST", widgets));
        assert!(reads("GET", &format!("{widgets}/w")));
        assert!(
            reads("GET", &format!("{widgets}/w?watch=true")),
            "a named get"
        );
        assert!(reads("GET", &format!("{widgets}?watch=false")));
        assert!(reads("GET", "/healthz"));
        assert!(reads("GET", "/no/such/path"));
        assert!(reads("GET", "/apis"));
        assert!(reads("GET", "/clusters/c1/apis/other.example.com/v1/x"));
        assert!(!reads("GET", &format!("{widgets}?watch=yes")));
        assert!(!reads("GET", &format!("{widgets}?watch=")));
        assert!(!reads(
            "GET",
            "/clusters/c1/apis/g/v1/watch/namespaces/n/widgets"
        ));
        assert!(!reads("GET", &format!("{widgets}/w/log")));
        assert!(!reads("POST", &format!("{widgets}/w/exec")));
        assert!(!reads("GET", "/apis/g/v1/widgets?watch=1"));
        assert!(!reads("GET", "/api/v1/namespaces/n/pods/p/portforward"));
        assert!(!reads("POST", "/bind/bindings"));
    }

    #[test]
    fn a_bad_timeout_is_refused_as_kube_apiserver_refuses_it() {
        let mut request = Request::get("/clusters/c1/apis/g/v1/widgets?timeout=x")
            .header("accept", "application/yaml")
            .body(())
            .unwrap();
        let answer = refusal(&mut request).expect("refused");
        assert_eq!(answer.status(), 400);
        assert_eq!(answer.headers()["content-type"], "application/yaml");
        let mut fine = Request::get("/clusters/c1/apis/g/v1/widgets?timeout=5s")
            .body(())
            .unwrap();
        assert!(refusal(&mut fine).is_none());
        let mut watch = Request::get("/clusters/c1/apis/g/v1/widgets?watch=1&timeout=x")
            .body(())
            .unwrap();
        assert!(
            refusal(&mut watch).is_none(),
            "a watch reads timeoutSeconds"
        );
    }
}
