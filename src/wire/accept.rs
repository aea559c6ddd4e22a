//! Which representation a client gets, decided from its `Accept` header as
//! kube-apiserver decides it for a custom resource
//! (`k8s.io/apiserver` v0.34 `endpoints/handlers/negotiation`, with
//! goautoneg's parsing and the CRD handler's restrictions):
//! - JSON or YAML of the resource itself, never protobuf (a custom resource
//!   has none);
//! - a `meta.k8s.io` `Table` (JSON or YAML), or `PartialObjectMetadata` and
//!   `PartialObjectMetadataList` (JSON, YAML or protobuf), v1 or v1beta1;
//! - watches in JSON, or protobuf for metadata; YAML is refused;
//! - errors in JSON, YAML or protobuf, whatever the request's target.
//!
//! Every media type bindery can write is one of these, so nothing a client
//! asks for is passed through untranslated. Pure.

use crate::status::ApiError;

/// A representation's media type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Media {
    Json,
    Yaml,
    Protobuf,
}

impl Media {
    /// The Content-Type kube-apiserver sends: the bare media type.
    pub fn content_type(self) -> &'static str {
        match self {
            Media::Json => "application/json",
            Media::Yaml => "application/yaml",
            Media::Protobuf => super::protobuf::MEDIA_TYPE,
        }
    }

    /// In the order kube-apiserver offers them for a custom resource.
    const OFFERED: [Media; 3] = [Media::Json, Media::Yaml, Media::Protobuf];

    fn parts(self) -> (&'static str, &'static str) {
        match self {
            Media::Json => ("application", "json"),
            Media::Yaml => ("application", "yaml"),
            Media::Protobuf => ("application", "vnd.kubernetes.protobuf"),
        }
    }

    /// Whether kube-apiserver streams watches in it.
    fn streams(self) -> bool {
        matches!(self, Media::Json | Media::Protobuf)
    }
}

/// `meta.k8s.io`'s versions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetaVersion {
    V1,
    V1beta1,
}

impl MetaVersion {
    pub fn api_version(self) -> &'static str {
        match self {
            MetaVersion::V1 => "meta.k8s.io/v1",
            MetaVersion::V1beta1 => "meta.k8s.io/v1beta1",
        }
    }
}

/// What the answer is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The resource itself (its objects, or its list).
    Resource,
    Table(MetaVersion),
    PartialObjectMetadata(MetaVersion),
    PartialObjectMetadataList(MetaVersion),
}

/// A negotiated representation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Output {
    pub media: Media,
    pub target: Target,
    /// `pretty=1` in the Accept clause (the query and User-Agent may also
    /// ask for it).
    pub pretty: bool,
}

/// The answer for a request with no Accept (or `*/*`).
pub const DEFAULT: Output = Output {
    media: Media::Json,
    target: Target::Resource,
    pretty: false,
};

/// One Accept clause, as goautoneg parses it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Clause {
    pub(crate) kind: String,
    pub(crate) sub_kind: String,
    pub(crate) q: f64,
    /// In header order; a repeated name counts with its last value (Go
    /// reads them into a map).
    params: Vec<(String, String)>,
}

impl Clause {
    /// The value of parameter `name`, if the clause has it.
    pub(crate) fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .rev()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// goautoneg's `ParseAccept`, its odd sort included (Go's insertion sort
/// with its `Less`, which is no strict order: the result depends on the
/// header's order, as it does in kube-apiserver).
pub(crate) fn parse_accept(header: &str) -> Vec<Clause> {
    let trim = |s: &str| s.trim_matches(' ').to_string();
    let mut clauses = Vec::new();
    for part in header.split(',') {
        let part = part.trim_matches(' ');
        let (media, params) = part.split_once(';').unwrap_or((part, ""));
        let (kind, rest) = media.split_once('/').unwrap_or((media, ""));
        let kind = trim(kind);
        let sub_kind = if rest.is_empty() {
            if kind != "*" {
                continue;
            }
            "*".to_string()
        } else {
            if rest.contains('/') {
                continue;
            }
            trim(rest)
        };
        let mut clause = Clause {
            kind,
            sub_kind,
            q: 1.0,
            params: Vec::new(),
        };
        for param in params.split(';').filter(|p| !p.is_empty()) {
            let Some((name, value)) = param.split_once('=') else {
                continue;
            };
            if value.contains('=') {
                continue;
            }
            let name = trim(name);
            if name == "q" {
                // strconv.ParseFloat(v, 32), 0 on error.
                clause.q = value.parse::<f32>().map(f64::from).unwrap_or(0.0);
            } else {
                clause.params.push((name, trim(value)));
            }
        }
        clauses.push(clause);
    }
    let less = |a: &Clause, b: &Clause| {
        a.q > b.q || (a.kind != "*" && b.kind == "*") || (a.sub_kind != "*" && b.sub_kind == "*")
    };
    for i in 1..clauses.len() {
        let mut j = i;
        while j > 0 && less(&clauses[j], &clauses[j - 1]) {
            clauses.swap(j, j - 1);
            j -= 1;
        }
    }
    clauses
}

/// What a clause's parameters ask of one media type.
struct Asked {
    target: Option<(String, String, String)>,
    pretty: bool,
}

/// kube-apiserver's `acceptMediaTypeOptions` for one clause and one
/// offered media type; `None` when the clause cannot be served in it.
fn asked(clause: &Clause, media: Media) -> Option<Asked> {
    let mut target: Option<(String, String, String)> = None;
    let mut pretty = false;
    // A map in Go: the last of a repeated parameter counts.
    for (name, value) in &clause.params {
        let slot = |t: &mut Option<(String, String, String)>| t.get_or_insert_default().clone();
        match name.as_str() {
            "as" => {
                let (_, g, v) = slot(&mut target);
                target = Some((value.clone(), g, v));
            }
            "g" => {
                let (k, _, v) = slot(&mut target);
                target = Some((k, value.clone(), v));
            }
            "v" => {
                let (k, g, _) = slot(&mut target);
                target = Some((k, g, value.clone()));
            }
            "stream" if !value.is_empty() && (!media.streams() || value != "watch") => {
                return None;
            }
            "sv" if !value.is_empty() && value != "v1" => return None,
            "pretty" => pretty = value == "1",
            _ => {}
        }
    }
    Some(Asked { target, pretty })
}

fn matches(clause: &Clause, media: Media) -> bool {
    let (kind, sub_kind) = media.parts();
    (clause.kind == kind && (clause.sub_kind == sub_kind || clause.sub_kind == "*"))
        || (clause.kind == "*" && clause.sub_kind == "*")
}

/// The first clause (in goautoneg's order) and offered media type that
/// `allow` takes.
fn negotiate<T>(
    header: Option<&str>,
    mut allow: impl FnMut(Media, &Asked) -> Option<T>,
) -> Option<(Media, T, bool)> {
    let header = header.unwrap_or_default();
    if header.is_empty() {
        let asked = Asked {
            target: None,
            pretty: false,
        };
        return allow(Media::Json, &asked).map(|t| (Media::Json, t, false));
    }
    for clause in parse_accept(header) {
        for media in Media::OFFERED {
            if !matches(&clause, media) {
                continue;
            }
            if let Some(asked) = asked(&clause, media)
                && let Some(target) = allow(media, &asked)
            {
                return Some((media, target, asked.pretty));
            }
        }
    }
    None
}

/// The CRD handler's `AllowsMediaTypeTransform`: what a custom resource
/// can be answered as in `media`.
fn resource_target(media: Media, asked: &Asked) -> Option<Target> {
    let Some((kind, group, version)) = &asked.target else {
        return (media != Media::Protobuf).then_some(Target::Resource);
    };
    let version = match (group.as_str(), version.as_str()) {
        ("meta.k8s.io", "v1") => MetaVersion::V1,
        ("meta.k8s.io", "v1beta1") => MetaVersion::V1beta1,
        _ => return None,
    };
    match kind.as_str() {
        "Table" if media != Media::Protobuf => Some(Target::Table(version)),
        "PartialObjectMetadata" => Some(Target::PartialObjectMetadata(version)),
        "PartialObjectMetadataList" => Some(Target::PartialObjectMetadataList(version)),
        _ => None,
    }
}

/// kube-apiserver's 406 for an Accept header nothing matches.
pub fn not_acceptable() -> ApiError {
    ApiError::not_acceptable(
        "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf",
    )
}

/// The representation of a response about a custom resource.
pub fn output(accept: Option<&str>) -> Result<Output, ApiError> {
    negotiate(accept, resource_target)
        .map(|(media, target, pretty)| Output {
            media,
            target,
            pretty,
        })
        .ok_or_else(not_acceptable)
}

/// The representation of a kind bindery serves only as itself (the kcp
/// dialect's objects): the first clause that takes the object in JSON or
/// YAML, one that streams for a watch. A Table or metadata form is not
/// offered, so a client that also accepts plain JSON (kubectl, informers)
/// gets that.
pub fn object_output(accept: Option<&str>, watch: bool) -> Result<Output, ApiError> {
    negotiate(accept, |media, asked| {
        (asked.target.is_none() && media != Media::Protobuf && (!watch || media.streams()))
            .then_some(Target::Resource)
    })
    .map(|(media, target, pretty)| Output {
        media,
        target,
        pretty,
    })
    .ok_or_else(not_acceptable)
}

/// The representation of a watch: [`output`], and then a media type that
/// streams, chosen as kube-apiserver's `NegotiateOutputMediaTypeStream`
/// chooses it (the first acceptable clause, whose type must stream).
pub fn watch_output(accept: Option<&str>) -> Result<Output, ApiError> {
    let chosen = output(accept)?;
    if !chosen.media.streams() {
        return Err(ApiError::not_acceptable(
            "only the following media types are accepted: application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch",
        ));
    }
    Ok(chosen)
}

/// The media type of an error `Status`, negotiated as kube-apiserver
/// negotiates errors (no `as=`); `None`: none fits, and the Status goes as
/// indented JSON.
pub fn error_media(accept: Option<&str>) -> Option<(Media, bool)> {
    negotiate(accept, |_, asked| asked.target.is_none().then_some(()))
        .map(|(media, (), pretty)| (media, pretty))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(accept: &str) -> Result<(Media, Target), u16> {
        output(Some(accept))
            .map(|o| (o.media, o.target))
            .map_err(|e| e.code)
    }

    const V1: MetaVersion = MetaVersion::V1;

    #[test]
    fn what_clients_send_gets_what_kube_apiserver_answers() {
        // kubectl get
        assert_eq!(
            out(
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
            ),
            Ok((Media::Json, Target::Table(V1)))
        );
        // client-go's metadata client, list and get
        assert_eq!(
            out(
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
            ),
            Ok((Media::Protobuf, Target::PartialObjectMetadataList(V1)))
        );
        assert_eq!(
            out("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1"),
            Ok((
                Media::Json,
                Target::PartialObjectMetadata(MetaVersion::V1beta1)
            ))
        );
        // client-go's typed clients ask protobuf first, then JSON
        assert_eq!(
            out("application/vnd.kubernetes.protobuf, */*"),
            Ok((Media::Json, Target::Resource))
        );
        assert_eq!(out("application/yaml"), Ok((Media::Yaml, Target::Resource)));
        assert_eq!(out("*/*"), Ok((Media::Json, Target::Resource)));
        assert_eq!(out("application/*"), Ok((Media::Json, Target::Resource)));
        assert_eq!(output(None).unwrap(), DEFAULT);
        assert_eq!(
            out("application/json; charset=utf-8"),
            Ok((Media::Json, Target::Resource))
        );
    }

    #[test]
    fn what_a_custom_resource_cannot_be_is_not_acceptable() {
        for accept in [
            "application/vnd.kubernetes.protobuf",
            "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1",
            "application/json;as=Table",
            "application/json;as=Widget;g=example.com;v=v1",
            "application/json;as=Table;g=meta.k8s.io;v=v2",
            "text/html",
            "Application/JSON",
            "application/json;sv=v2",
        ] {
            let error = output(Some(accept)).unwrap_err();
            assert_eq!(error.code, 406, "{accept}");
            assert_eq!(
                error.message,
                "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"
            );
        }
    }

    #[test]
    fn clauses_sort_as_goautoneg_sorts_them() {
        assert_eq!(
            out("application/yaml;q=0.5, application/json"),
            Ok((Media::Json, Target::Resource))
        );
        // Its Less puts a concrete type before a wildcard...
        assert_eq!(
            out("*/*, application/yaml;q=0.5"),
            Ok((Media::Yaml, Target::Resource))
        );
        // ...but only when it meets it: header order decides otherwise.
        assert_eq!(
            out("application/yaml;q=0.5, */*"),
            Ok((Media::Json, Target::Resource))
        );
        // q=0 is kept, and sorts last.
        assert_eq!(
            out("application/yaml;q=0, application/json;q=0.1"),
            Ok((Media::Json, Target::Resource))
        );
        assert_eq!(
            out("application/yaml;q=0"),
            Ok((Media::Yaml, Target::Resource))
        );
    }

    #[test]
    fn watches_stream_json_or_protobuf_only() {
        let media = |accept: &str| {
            watch_output(Some(accept))
                .map(|o| o.media)
                .map_err(|e| e.code)
        };
        assert_eq!(media("application/json"), Ok(Media::Json));
        assert_eq!(
            media(
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
            ),
            Ok(Media::Protobuf)
        );
        assert_eq!(media("application/yaml"), Err(406));
        assert_eq!(media("application/yaml, application/json"), Err(406));
        assert_eq!(media("application/json;stream=watch"), Ok(Media::Json));
        assert_eq!(
            watch_output(Some("application/yaml")).unwrap_err().message,
            "only the following media types are accepted: application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch"
        );
    }

    #[test]
    fn errors_ignore_the_target() {
        assert_eq!(
            error_media(Some("application/vnd.kubernetes.protobuf")),
            Some((Media::Protobuf, false))
        );
        assert_eq!(
            error_media(Some(
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
            )),
            None,
            "only as= clauses: indented JSON"
        );
        assert_eq!(
            error_media(Some(
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
            )),
            Some((Media::Json, false))
        );
        assert_eq!(error_media(None), Some((Media::Json, false)));
        assert_eq!(
            error_media(Some("application/json;pretty=1")),
            Some((Media::Json, true))
        );
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_headers_never_panic(accept in "\\PC{0,80}") {
            let _ = output(Some(&accept));
            let _ = watch_output(Some(&accept));
            let _ = error_media(Some(&accept));
        }
    }
}
