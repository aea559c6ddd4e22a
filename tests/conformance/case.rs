//! The case format: a YAML file under `conformance/cases/` holds a list of
//! cases; each case is a list of steps (kubectl invocations, raw HTTP
//! requests, watches) whose outputs are compared between the targets.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub name: String,
    pub steps: Vec<Step>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// kubectl arguments, split on whitespace (use `args` for arguments with spaces).
    pub kubectl: Option<String>,
    pub args: Option<Vec<String>>,
    pub stdin: Option<String>,
    /// `METHOD /path?query` of a raw request.
    pub http: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// A request body: a string is sent as is, anything else as JSON.
    pub body: Option<serde_norway::Value>,
    /// A request body given as base64, for bytes YAML cannot hold (invalid
    /// UTF-8).
    pub body_base64: Option<String>,
    /// `/path?query` of a watch; it is read until `events` events arrived
    /// (after `during` ran) or the stream ends.
    pub watch: Option<String>,
    pub events: Option<usize>,
    #[serde(default)]
    pub during: Vec<Step>,
    /// Variables to take from the JSON response: name → dot path.
    #[serde(default)]
    pub capture: BTreeMap<String, String>,
    /// Who acts: absent for the target's consumer, `other` for the second
    /// consumer that must never see, or be seen by, the first.
    #[serde(rename = "as")]
    pub actor: Option<String>,
    /// Whether the output takes part in the comparison (default true).
    #[serde(default = "yes")]
    pub compare: bool,
}

fn yes() -> bool {
    true
}

/// Every case of every file in `dir`, in file-name order.
pub fn load(dir: &Path) -> Result<Vec<(String, Case)>, String> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    let mut cases = Vec::new();
    for file in files {
        let text =
            std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let parsed: Vec<Case> =
            serde_norway::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
        let stem = file
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        cases.extend(parsed.into_iter().map(|c| (stem.clone(), c)));
    }
    Ok(cases)
}
