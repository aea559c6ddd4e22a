//! Test helpers for the API types: wire round-trips.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Parses `json` as `T`, writes it back and checks nothing was lost, added or
/// renamed. Returns the typed value for further checks.
#[track_caller]
pub fn assert_json_round_trip<T: Serialize + DeserializeOwned>(json: &str) -> T {
    let expected: Value = serde_json::from_str(json).expect("the example is JSON");
    round_trip(expected)
}

/// Like [`assert_json_round_trip`], for a YAML example.
#[track_caller]
pub fn assert_yaml_round_trip<T: Serialize + DeserializeOwned>(yaml: &str) -> T {
    let expected: Value = serde_norway::from_str(yaml).expect("the example is YAML");
    round_trip(expected)
}

#[track_caller]
fn round_trip<T: Serialize + DeserializeOwned>(expected: Value) -> T {
    let typed: T = match serde_json::from_value(expected.clone()) {
        Ok(typed) => typed,
        Err(e) => panic!("the example does not parse: {e}"),
    };
    let written = serde_json::to_value(&typed).expect("the typed value serializes");
    assert_eq!(
        written,
        expected,
        "round trip changed the object:\nwritten:  {}\nexpected: {}",
        serde_json::to_string_pretty(&written).unwrap_or_default(),
        serde_json::to_string_pretty(&expected).unwrap_or_default(),
    );
    typed
}
