//! The checks go-restful makes of a request for a built-in kind before
//! kube-apiserver's handler reads it (`github.com/emicklei/go-restful/v3`
//! `jsr311.go` `detectRoute`, `route.go` `matchesContentType` and
//! `matchesAccept`, with the routes kube-apiserver v1.34 installs): the
//! Content-Type a patch route consumes, then the Accept a route produces.
//! Custom resources are served by kube-apiserver's own handler, without
//! go-restful, so these apply to built-in kinds only. Their errors are
//! go-restful's, not the handler's. Pure.

use super::body::Rules;
use super::verb::Verb;
use crate::status::ApiError;

/// The groups kube-apiserver v1.34 serves itself (the core group is
/// `""`), those its alpha and beta APIs add included. A group of a CRD
/// may end in `.k8s.io` too (`gateway.networking.k8s.io`), so the list is
/// exact.
const BUILT_IN_GROUPS: [&str; 23] = [
    "",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "apiregistration.k8s.io",
    "apps",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "autoscaling",
    "batch",
    "certificates.k8s.io",
    "coordination.k8s.io",
    "discovery.k8s.io",
    "events.k8s.io",
    "flowcontrol.apiserver.k8s.io",
    "internal.apiserver.k8s.io",
    "networking.k8s.io",
    "node.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "resource.k8s.io",
    "scheduling.k8s.io",
    "storage.k8s.io",
    "storagemigration.k8s.io",
];

/// The rules a kube-apiserver reads requests for `group` by: a built-in
/// kind's, or (any other group) a custom resource's.
pub fn rules(group: &str) -> Rules {
    if BUILT_IN_GROUPS.contains(&group) {
        Rules::BuiltIn
    } else {
        Rules::CustomResource
    }
}

/// What a patch route consumes (no other route of a resource names any).
const PATCH_TYPES: [&str; 4] = [
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
];

/// What the routes of a resource produce, as go-restful lists them.
const OBJECT_TYPES: [&str; 3] = [
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
];
const LIST_TYPES: [&str; 5] = [
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
    "application/json;stream=watch",
    "application/vnd.kubernetes.protobuf;stream=watch",
];

/// go-restful's route checks for `verb`: 415, then 406.
pub fn check(verb: Verb, content_type: Option<&str>, accept: Option<&str>) -> Result<(), ApiError> {
    if verb == Verb::Patch {
        // A request with no Content-Type is taken as octet-stream.
        let content_type = content_type
            .filter(|c| !c.is_empty())
            .unwrap_or("application/octet-stream");
        if !any_listed(content_type, &PATCH_TYPES) {
            return Err(ApiError::route_unsupported_media_type());
        }
    }
    let produced: &[&str] = match verb {
        Verb::List | Verb::Watch | Verb::DeleteCollection => &LIST_TYPES,
        _ => &OBJECT_TYPES,
    };
    let accept = accept.filter(|a| !a.is_empty()).unwrap_or("*/*");
    if accept_split(accept).any(|media| media == "*/*") || any_listed(accept, produced) {
        return Ok(());
    }
    Err(ApiError::route_not_acceptable(produced))
}

/// Whether one of the comma-separated media types of `header` (parameters
/// cut, spaces trimmed, compared exactly) is `listed`.
fn any_listed(header: &str, listed: &[&str]) -> bool {
    accept_split(header).any(|media| listed.contains(&media))
}

/// go-restful's reading of a header: each comma-separated part, cut at its
/// first `;` and trimmed of spaces (only spaces).
fn accept_split(header: &str) -> impl Iterator<Item = &str> {
    header.split(',').map(|part| {
        let media = part.split_once(';').map_or(part, |(media, _)| media);
        media.trim_matches(' ')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(verb: Verb, content_type: Option<&str>, accept: Option<&str>) -> Option<u16> {
        check(verb, content_type, accept).err().map(|e| e.code)
    }

    #[test]
    fn built_in_groups_are_known_by_name() {
        for group in ["", "apps", "networking.k8s.io"] {
            assert_eq!(rules(group), Rules::BuiltIn, "{group:?}");
        }
        for group in ["gateway.networking.k8s.io", "example.com", "Apps"] {
            assert_eq!(rules(group), Rules::CustomResource, "{group}");
        }
    }

    #[test]
    fn accept_is_matched_by_media_type_exactly() {
        for accept in [
            None,
            Some(""),
            Some("*/*"),
            Some("application/json"),
            Some("application/json;as=Table;v=v1;g=meta.k8s.io"),
            Some("text/html, application/yaml;q=0"),
            Some(",application/json"),
            Some("application/vnd.kubernetes.protobuf"),
        ] {
            assert_eq!(code(Verb::Get, None, accept), None, "{accept:?}");
        }
        for accept in [
            "text/html",
            "application/*",
            "Application/JSON",
            "application/json\t",
        ] {
            assert_eq!(code(Verb::Get, None, Some(accept)), Some(406), "{accept}");
        }
    }

    #[test]
    fn the_refusals_are_go_restfuls() {
        let error = check(Verb::Create, Some("text/plain"), Some("text/html")).unwrap_err();
        assert_eq!(
            (error.code, error.message.as_str(), error.details),
            (
                406,
                "406: Not Acceptable\n\nAvailable representations: application/json, application/yaml, application/vnd.kubernetes.protobuf",
                Some(serde_json::json!({}))
            )
        );
        let error = check(Verb::List, None, Some("text/html")).unwrap_err();
        assert!(
            error.message.ends_with(
                "application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch"
            ),
            "{}",
            error.message
        );
        // A patch's type comes first.
        let error = check(Verb::Patch, Some("text/plain"), Some("text/html")).unwrap_err();
        assert_eq!(
            (error.code, error.message.as_str()),
            (415, "415: Unsupported Media Type")
        );
    }

    #[test]
    fn patch_types_are_matched_as_go_restful_matches_them() {
        for content_type in [
            "application/strategic-merge-patch+json",
            "application/merge-patch+json; charset=utf-8",
            "text/plain, application/json-patch+json",
            " application/apply-patch+yaml",
        ] {
            assert_eq!(
                code(Verb::Patch, Some(content_type), None),
                None,
                "{content_type}"
            );
        }
        for content_type in [
            None,
            Some(""),
            Some("application/json"),
            Some("Application/Merge-Patch+JSON"),
        ] {
            assert_eq!(
                code(Verb::Patch, content_type, None),
                Some(415),
                "{content_type:?}"
            );
        }
        assert_eq!(
            code(Verb::Create, Some("text/plain"), None),
            None,
            "the handler's to refuse"
        );
    }
}
