//! Discovery and OpenAPI on one consumer's workspace path: the export's
//! documents, plus the claimed resources the consumer accepted, taken from
//! its app cluster's own documents and narrowed to those resources
//! ([`crate::translate::claimed_discovery`]).

use super::claimed::{ClaimedTarget, accepted_claims};
use crate::app::App;
use crate::discovery::Document;
use crate::documents::Rendered;
use crate::route::ApiPath;
use crate::status::ApiError;
use crate::translate::claimed_discovery::{
    ClaimedResources, merge_aggregated, merge_group_list, merge_resource_list,
};
use http::header::ACCEPT;
use serde_json::Value;

const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// The export's document for `path` (`exported`) with the consumer's
/// claimed resources added.
pub async fn add_claimed(
    app: &App,
    target: &ClaimedTarget<'_>,
    path: &ApiPath,
    exported: Option<Rendered>,
) -> Result<Option<Rendered>, ApiError> {
    let claimed = ClaimedResources::new(&accepted_claims(app, target, None).await?);
    if claimed.is_empty() {
        return Ok(exported);
    }
    add(&AppReader { app, target }, &claimed, path, exported).await
}

async fn add(
    reader: &AppReader<'_>,
    claimed: &ClaimedResources,
    path: &ApiPath,
    exported: Option<Rendered>,
) -> Result<Option<Rendered>, ApiError> {
    Ok(match (path, exported) {
        (ApiPath::LegacyRoot, Some(mut rendered @ Rendered::Tagged { .. }))
            if claimed.has_group("") =>
        {
            add_aggregated(reader, claimed, "/api", rendered.value_mut()).await?;
            Some(rendered)
        }
        (ApiPath::GroupList, Some(mut rendered @ Rendered::Tagged { .. }))
            if claimed.has_named_group() =>
        {
            add_aggregated(reader, claimed, "/apis", rendered.value_mut()).await?;
            Some(rendered)
        }
        (ApiPath::GroupList, Some(Rendered::Plain(mut value))) if claimed.has_named_group() => {
            let mut groups = reader.get("/apis", "application/json").await?;
            claimed.narrow_group_list(&mut groups);
            merge_group_list(&mut value, groups);
            Some(Rendered::Plain(value))
        }
        (ApiPath::Group(group), None) if !group.is_empty() && claimed.has_group(group) => {
            let found = reader
                .find(&format!("/apis/{group}"), "application/json")
                .await?;
            found.map(Rendered::Plain)
        }
        (ApiPath::GroupVersion { group, version }, exported) if claimed.has_group(group) => {
            resource_list(reader, claimed, group, version, exported).await?
        }
        (ApiPath::Legacy(segments), None) if segments.len() == 1 && claimed.has_group("") => {
            resource_list(reader, claimed, "", &segments[0], None).await?
        }
        (ApiPath::OpenApiV3Root, Some(Rendered::Plain(mut value))) => {
            add_openapi_links(reader, claimed, &mut value).await?;
            Some(Rendered::Plain(value))
        }
        (ApiPath::OpenApiV3GroupVersion { group, version }, None) if claimed.has_group(group) => {
            openapi_document(reader, claimed, group, version)
                .await?
                .map(|value| Rendered::Tagged {
                    value,
                    content_type: "application/json",
                    vary: false,
                })
        }
        (_, exported) => exported,
    })
}

/// Adds the claimed resources of the app cluster's aggregated discovery at
/// `path` (`/api` or `/apis`) to the export's list.
async fn add_aggregated(
    reader: &AppReader<'_>,
    claimed: &ClaimedResources,
    path: &str,
    exported: &mut Value,
) -> Result<(), ApiError> {
    let mut app = reader.get(path, AGGREGATED).await?;
    claimed.narrow_aggregated(&mut app);
    merge_aggregated(exported, app);
    Ok(())
}

/// `/api/<v>` or `/apis/<g>/<v>`: the export's resources and the claimed.
async fn resource_list(
    reader: &AppReader<'_>,
    claimed: &ClaimedResources,
    group: &str,
    version: &str,
    exported: Option<Rendered>,
) -> Result<Option<Rendered>, ApiError> {
    let Some(mut list) = reader
        .find(&group_version_path("", group, version), "application/json")
        .await?
    else {
        return Ok(exported);
    };
    claimed.narrow_resource_list(&mut list);
    if exported.is_none() && list["resources"].as_array().is_none_or(|r| r.is_empty()) {
        return Ok(None);
    }
    let exported = exported.map(|mut e| std::mem::take(e.value_mut()));
    Ok(Some(Rendered::Plain(merge_resource_list(exported, list))))
}

/// The app cluster's OpenAPI v3 document of a claimed group-version, narrowed.
async fn openapi_document(
    reader: &AppReader<'_>,
    claimed: &ClaimedResources,
    group: &str,
    version: &str,
) -> Result<Option<Value>, ApiError> {
    let path = group_version_path("/openapi/v3", group, version);
    let Some(mut document) = reader.find(&path, "application/json").await? else {
        return Ok(None);
    };
    claimed.narrow_openapi_document(group, &mut document);
    Ok(Some(document))
}

/// Links each claimed group-version the app cluster documents from the
/// OpenAPI v3 root, hashed as the narrowed document is served.
async fn add_openapi_links(
    reader: &AppReader<'_>,
    claimed: &ClaimedResources,
    root: &mut Value,
) -> Result<(), ApiError> {
    let mut app_root = reader.get("/openapi/v3", "application/json").await?;
    claimed.narrow_openapi_root(&mut app_root);
    let keys: Vec<String> = app_root["paths"]
        .as_object()
        .map(|paths| paths.keys().cloned().collect())
        .unwrap_or_default();
    for key in keys {
        let Some(paths) = root.get_mut("paths").and_then(Value::as_object_mut) else {
            return Ok(());
        };
        if paths.contains_key(&key) {
            continue;
        }
        let (group, version) = match key.split('/').collect::<Vec<_>>().as_slice() {
            ["api", version] => (String::new(), version.to_string()),
            ["apis", group, version] => (group.to_string(), version.to_string()),
            _ => continue,
        };
        let Some(document) = openapi_document(reader, claimed, &group, &version).await? else {
            continue;
        };
        let hash = Document::new(&document).hash;
        paths.insert(
            key.clone(),
            serde_json::json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={hash}")}),
        );
    }
    Ok(())
}

fn group_version_path(base: &str, group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("{base}/api/{version}")
    } else {
        format!("{base}/apis/{group}/{version}")
    }
}

/// Reads documents from the consumer's app cluster as bindery's account.
struct AppReader<'a> {
    app: &'a App,
    target: &'a ClaimedTarget<'a>,
}

impl AppReader<'_> {
    async fn get(&self, path: &str, accept: &str) -> Result<Value, ApiError> {
        self.find(path, accept)
            .await?
            .ok_or_else(|| ApiError::unavailable(format!("the app cluster does not serve {path}")))
    }

    /// `None` when the app cluster answers 404.
    async fn find(&self, path: &str, accept: &str) -> Result<Option<Value>, ApiError> {
        let registration = self
            .app
            .registrations
            .get(self.target.consumer.as_str())
            .ok_or_else(|| ApiError::unavailable("the consumer's app cluster is not registered"))?;
        let client = registration.app.clone();
        drop(registration);
        let request = http::Request::builder()
            .uri(path)
            .header(ACCEPT, accept)
            .body(Vec::new())
            .map_err(|e| ApiError::internal(e.to_string()))?;
        match client.request::<Value>(request).await {
            Ok(value) => Ok(Some(value)),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
            Err(error) => Err(super::claimed_writes::app_cluster_unreachable(error)),
        }
    }
}
