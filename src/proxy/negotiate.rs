//! Content negotiation on the way through. bindery must read every body it
//! passes on, so it asks the provider for JSON where a client asked for YAML,
//! and turns the JSON back into YAML for that client.

/// The Accept header to send upstream, and whether the answer must be turned
/// into YAML for the client. Watches keep their Accept header: the provider
/// refuses YAML watches itself, as it should.
pub fn upstream_accept(accept: Option<&str>, watch: bool) -> (Option<String>, bool) {
    let Some(accept) = accept else {
        return (None, false);
    };
    if watch {
        return (Some(accept.to_string()), false);
    }
    let mut wants_yaml = false;
    let mut first_decided = false;
    let rewritten: Vec<String> = accept
        .split(',')
        .map(|entry| {
            let entry = entry.trim();
            let (media, params) = entry.split_once(';').unwrap_or((entry, ""));
            let media_type = media.trim().to_ascii_lowercase();
            if !first_decided && !media_type.is_empty() {
                first_decided = true;
                wants_yaml = media_type == "application/yaml";
            }
            if media_type == "application/yaml" {
                if params.is_empty() {
                    "application/json".to_string()
                } else {
                    format!("application/json;{params}")
                }
            } else {
                entry.to_string()
            }
        })
        .collect();
    (Some(rewritten.join(",")), wants_yaml)
}

/// A JSON body as YAML, as kube-apiserver writes it.
pub fn json_to_yaml(json: &[u8]) -> Option<Vec<u8>> {
    let value: serde_json::Value = serde_json::from_slice(json).ok()?;
    Some(crate::wire::yaml::to_yaml(&value).into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_becomes_json_upstream() {
        assert_eq!(
            upstream_accept(Some("application/yaml"), false),
            (Some("application/json".into()), true)
        );
        assert_eq!(
            upstream_accept(
                Some("application/json;as=Table;v=v1;g=meta.k8s.io,application/json"),
                false
            ),
            (
                Some("application/json;as=Table;v=v1;g=meta.k8s.io,application/json".into()),
                false
            )
        );
        assert_eq!(
            upstream_accept(Some("application/json, application/yaml"), false),
            (Some("application/json,application/json".into()), false)
        );
        assert_eq!(
            upstream_accept(Some("application/yaml"), true),
            (Some("application/yaml".into()), false)
        );
        assert_eq!(upstream_accept(None, false), (None, false));
    }

    #[test]
    fn yaml_output() {
        assert_eq!(json_to_yaml(br#"{"a":1}"#).unwrap(), b"a: 1\n");
        assert!(json_to_yaml(b"nope").is_none());
    }
}
