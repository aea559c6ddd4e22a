//! The `/bind` routes, parsed once from the method and the path: what each
//! asks, what authenticates its caller, and how large a body it may send.
//! Every route takes provider credentials ([`crate::auth::provider`])
//! except the browser's pages of an interactive bind, which have only the
//! session's id in their URL: the id, random and short-lived, is their
//! credential, and their bodies are small forms. Pure.

use super::page;
use crate::proxy::{error, full};
use crate::status::ApiError;
use crate::upstream::BoxBody;
use http::{Method, Response};

/// The body a browser's session page may send at most: a form naming one
/// template.
pub const SESSION_BODY_BYTES: usize = 16 * 1024;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BindRoute {
    /// `GET templates`: the offers the binder may bind.
    Templates,
    /// `POST bindings`: bind.
    Bind,
    /// `GET bindings/<consumer>/<export>`.
    BindingState {
        consumer: String,
        export: String,
    },
    /// `DELETE bindings/<consumer>/<export>`: unbind.
    Unbind {
        consumer: String,
        export: String,
    },
    /// `POST sessions`: the CLI opens an interactive bind.
    OpenSession,
    /// `GET sessions/<id>`: the browser's page.
    SessionPage(String),
    /// `POST sessions/<id>/choice`: the browser's pick.
    Choose(String),
    /// `GET sessions/<id>/state`: the page's script polls.
    SessionState(String),
    /// `POST sessions/<id>/progress`: the CLI reports.
    Progress(String),
    /// A known path with a method it does not serve.
    MethodNotAllowed(Method),
    NotFound,
}

/// What authenticates a route's caller.
#[derive(Debug, PartialEq, Eq)]
pub enum Credential<'a> {
    /// A provider user's client certificate or token.
    Provider,
    /// The id of a live bind session, in the URL.
    Session(&'a str),
}

impl BindRoute {
    /// The route of `method` on `/bind/<segments>`.
    pub fn of(method: &Method, segments: &[String]) -> Self {
        let path: Vec<&str> = segments.iter().map(String::as_str).collect();
        let owned = |s: &str| s.to_string();
        match (method, path.as_slice()) {
            (&Method::GET, ["templates"]) => Self::Templates,
            (&Method::POST, ["bindings"]) => Self::Bind,
            (&Method::GET, ["bindings", consumer, export]) => Self::BindingState {
                consumer: owned(consumer),
                export: owned(export),
            },
            (&Method::DELETE, ["bindings", consumer, export]) => Self::Unbind {
                consumer: owned(consumer),
                export: owned(export),
            },
            (&Method::POST, ["sessions"]) => Self::OpenSession,
            (&Method::GET, ["sessions", id]) => Self::SessionPage(owned(id)),
            (&Method::POST, ["sessions", id, "choice"]) => Self::Choose(owned(id)),
            (&Method::GET, ["sessions", id, "state"]) => Self::SessionState(owned(id)),
            (&Method::POST, ["sessions", id, "progress"]) => Self::Progress(owned(id)),
            (_, ["templates" | "bindings" | "sessions", ..]) => {
                Self::MethodNotAllowed(method.clone())
            }
            _ => Self::NotFound,
        }
    }

    pub fn credential(&self) -> Credential<'_> {
        match self {
            Self::SessionPage(id) | Self::Choose(id) | Self::SessionState(id) => {
                Credential::Session(id)
            }
            _ => Credential::Provider,
        }
    }

    /// The largest body the route reads.
    pub fn body_limit(&self) -> usize {
        match self {
            Self::SessionPage(_) | Self::Choose(_) | Self::SessionState(_) | Self::Progress(_) => {
                SESSION_BODY_BYTES
            }
            _ => crate::request_body::MAX_BODY_BYTES,
        }
    }

    /// The answer to a caller whose credential does not authenticate: the
    /// page saying the session is unknown or has expired for the browser's
    /// pages (a 404, as for a session that never was), kube-apiserver's 401
    /// for everything else. The same whatever the reason.
    pub fn refused(&self) -> Response<BoxBody> {
        match self {
            Self::SessionPage(_) | Self::Choose(_) => html(404, page::problem(page::EXPIRED)),
            Self::SessionState(id) => error(&ApiError::object_not_found("", "bind sessions", id)),
            _ => error(&ApiError::unauthorized()),
        }
    }
}

pub fn html(status: u16, page: String) -> Response<BoxBody> {
    full(status, "text/html; charset=utf-8", page)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any method and path under `/bind` is one route, read without a
        /// panic, with a body limit kube-apiserver's 3 MiB does not exceed.
        #[test]
        fn any_path_is_one_route(
            method in prop::sample::select(vec!["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "TRACE"]),
            segments in prop::collection::vec("[ -~]{0,12}|sessions|bindings|templates|progress|state|choice", 0..6),
        ) {
            let method = Method::from_bytes(method.as_bytes()).unwrap();
            let route = BindRoute::of(&method, &segments);
            prop_assert!(route.body_limit() <= 3 * 1024 * 1024);
            let _ = route.credential();
        }
    }

    fn route(method: Method, path: &str) -> BindRoute {
        let segments: Vec<String> = path.split('/').map(str::to_string).collect();
        BindRoute::of(&method, &segments)
    }

    #[test]
    fn only_the_browsers_pages_are_authenticated_by_the_session_id() {
        let session = |r: &BindRoute| matches!(r.credential(), Credential::Session("s1"));
        assert!(session(&route(Method::GET, "sessions/s1")));
        assert!(session(&route(Method::POST, "sessions/s1/choice")));
        assert!(session(&route(Method::GET, "sessions/s1/state")));
        for provider in [
            route(Method::POST, "sessions/s1/progress"),
            route(Method::POST, "sessions"),
            route(Method::GET, "templates"),
            route(Method::POST, "bindings"),
            route(Method::DELETE, "bindings/c1/e1"),
            route(Method::PUT, "sessions/s1"),
            route(Method::GET, "elsewhere"),
        ] {
            assert_eq!(provider.credential(), Credential::Provider, "{provider:?}");
        }
    }

    #[test]
    fn session_routes_read_small_bodies() {
        assert_eq!(
            route(Method::POST, "sessions/s1/choice").body_limit(),
            SESSION_BODY_BYTES
        );
        assert_eq!(
            route(Method::POST, "bindings").body_limit(),
            crate::request_body::MAX_BODY_BYTES
        );
    }
}
