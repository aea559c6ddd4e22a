//! Differential test of `bindery::table` (the Tables bindery renders from
//! its cache) against kube-apiserver's own table convertor for CRDs: the Go
//! program in `tests/oracles/table` (k8s.io/apiextensions-apiserver
//! v0.34.10, pinned in its go.mod), built into `<target>/oracles/` and fed
//! every case in one run. Without a Go toolchain, or if the oracle does not
//! build, this fails: it never skips.
//!
//! Cases are fixed ones (each rule the module claims) and a few thousand
//! random ones from proptest's `TestRunner` with a fixed seed: objects of
//! nested maps and lists holding strings (some with `<`, `&`, unicode),
//! integers, integral and fractional floats from tiny to huge, booleans and
//! nulls; columns of every type but `date` (its cells depend on the clock;
//! the unit tests pin it) over paths of fields, quoted keys, indices
//! (negative, out of range), `[*]` and filters. Where bindery renders a
//! cell, it must be Go's, and the column definitions must be Go's; where it
//! declines (`Unsupported`, the provider is then asked), that is counted,
//! and must stay rare.

use std::path::PathBuf;

#[path = "oracles/runner.rs"]
mod runner;

use bindery::table::Columns;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinitionSpec, CustomResourceDefinitionVersion,
};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{Value, json};

const RANDOM_CASES: usize = 4000;

fn oracle() -> PathBuf {
    runner::build(
        "table",
        "it needs k8s.io/apiextensions-apiserver v0.34.10 and its dependencies in the module cache, or a module proxy",
    )
}

struct Case {
    columns: Vec<Value>,
    object: Value,
}

impl Case {
    fn line(&self) -> String {
        json!({"columns": self.columns, "object": self.object}).to_string()
    }

    fn spec(&self) -> CustomResourceDefinitionSpec {
        let columns: Vec<CustomResourceColumnDefinition> =
            serde_json::from_value(Value::Array(self.columns.clone())).expect("columns");
        CustomResourceDefinitionSpec {
            versions: vec![CustomResourceDefinitionVersion {
                name: "v1".into(),
                served: true,
                storage: true,
                additional_printer_columns: Some(columns),
                ..Default::default()
            }],
            ..Default::default()
        }
    }
}

fn column(name: &str, kind: &str, path: &str) -> Value {
    json!({"name": name, "type": kind, "jsonPath": path})
}

fn fixed_cases() -> Vec<Case> {
    let object = json!({
        "metadata": {"name": "w"},
        "spec": {"size": "small", "replicas": 3, "ratio": 0.5, "whole": 2.0, "big": 1e22,
            "tiny": 1e-7, "million": 1000000.0, "on": true, "nothing": null, "text": "a<b&c",
            "list": [1, "two", {"three": 3}], "map": {"b": 2, "a": [1.5, null]},
            "dotted.key": "d", "huge": 18446744073709551615u64},
        "status": {"conditions": [
            {"type": "Synced", "status": "True", "count": 1},
            {"type": "Ready", "status": "False", "count": 2}]},
    });
    let mut columns = Vec::new();
    for kind in ["string", "integer", "number", "boolean", "unknown"] {
        for path in [
            ".spec.size",
            ".spec.replicas",
            ".spec.ratio",
            ".spec.whole",
            ".spec.big",
            ".spec.tiny",
            ".spec.million",
            ".spec.on",
            ".spec.nothing",
            ".spec.text",
            ".spec.list",
            ".spec.map",
            ".spec.missing",
            ".spec.size.deeper",
            ".spec['dotted.key']",
            ".spec.list[0]",
            ".spec.list[-1]",
            ".spec.list[3]",
            ".spec.list[*]",
            ".spec.huge",
            ".spec.map.a[1]",
            r#".status.conditions[?(@.type=="Ready")].status"#,
            ".status.conditions[?(@.count==2)].type",
            ".status.conditions[?(@.type!='Ready')].count",
            ".status.conditions[?(@.type==2)].status",
            ".spec[?(@.a=='b')]",
        ] {
            columns.push(column(&format!("{kind}{path}"), kind, path));
        }
    }
    let mut described = column("D", "string", ".spec.size");
    described["description"] = json!("A size.");
    described["format"] = json!("byte");
    described["priority"] = json!(3);
    columns.push(described);
    columns
        .into_iter()
        .map(|c| Case {
            columns: vec![c],
            object: object.clone(),
        })
        .collect()
}

fn pick<'a, T>(runner: &mut TestRunner, items: &'a [T]) -> &'a T {
    use proptest::prelude::RngExt;
    &items[runner.rng().random_range(0..items.len())]
}

fn chance(runner: &mut TestRunner, percent: u32) -> bool {
    use proptest::prelude::RngExt;
    runner.rng().random_range(0..100) < percent
}

const KEYS: [&str; 6] = ["a", "b", "type", "status", "x.y", "n"];

fn random_value(runner: &mut TestRunner, depth: u32) -> Value {
    use proptest::prelude::RngExt;
    let leaf = depth >= 3 || chance(runner, 45);
    if leaf {
        return match runner.rng().random_range(0..9) {
            0 => json!(pick(runner, &["a", "Ready", "<x>&y", "ünï", "", "1"]).to_string()),
            1 => json!(runner.rng().random_range(-5i64..5)),
            2 => json!(runner.rng().random_range(-1.0e9f64..1.0e9)),
            3 => json!(*pick(
                runner,
                &[2.0, 1e6, 1e21, 1e-5, 0.1, -0.0, 123456.5, 1e300]
            )),
            4 => json!(chance(runner, 50)),
            5 => Value::Null,
            6 => json!(i64::MAX),
            7 => json!(*pick(runner, &["True", "False"])),
            _ => json!(runner.rng().random_range(0u64..3) + 9_223_372_036_854_775_807u64),
        };
    }
    if chance(runner, 50) {
        let len = runner.rng().random_range(0..4);
        Value::Array((0..len).map(|_| random_value(runner, depth + 1)).collect())
    } else {
        let len = runner.rng().random_range(0..4);
        let mut map = serde_json::Map::new();
        for _ in 0..len {
            let key = pick(runner, &KEYS).to_string();
            let value = random_value(runner, depth + 1);
            map.insert(key, value);
        }
        Value::Object(map)
    }
}

fn random_path(runner: &mut TestRunner) -> String {
    use proptest::prelude::RngExt;
    let mut path = String::new();
    let steps = runner.rng().random_range(1..5);
    for _ in 0..steps {
        match runner.rng().random_range(0..10) {
            0..=4 => {
                let key = *pick(runner, &KEYS);
                if key.contains('.') {
                    path.push_str(&format!("['{key}']"));
                } else {
                    path.push('.');
                    path.push_str(key);
                }
            }
            5 => path.push_str(&format!("[{}]", runner.rng().random_range(-3i64..4))),
            6 => path.push_str("[*]"),
            7 => {
                let literal = *pick(
                    runner,
                    &["'Ready'", "\"a\"", "1", "-2", "true", "false", "''"],
                );
                let op = *pick(runner, &["==", "!=", " == "]);
                let key = *pick(runner, &["type", "a", "n", "status"]);
                path.push_str(&format!("[?(@.{key}{op}{literal})]"));
            }
            8 => path.push_str(".spec"),
            _ => path.push_str(".status"),
        }
    }
    path
}

fn random_case(runner: &mut TestRunner) -> Case {
    let mut object = json!({"metadata": {"name": "random"}});
    for top in ["spec", "status"] {
        object[top] = random_value(runner, 0);
    }
    let kind = *pick(
        runner,
        &["string", "string", "integer", "number", "boolean"],
    );
    Case {
        columns: vec![column("C", kind, &random_path(runner))],
        object,
    }
}

#[test]
fn table_cells_agree_with_kube_apiservers_table_convertor() {
    let binary = oracle();
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[0x7a; 32]),
    );
    let mut cases = fixed_cases();
    let fixed = cases.len();
    cases.extend((0..RANDOM_CASES).map(|_| random_case(&mut runner)));
    let lines: Vec<String> = cases.iter().map(Case::line).collect();
    let answers = runner::run("table", &binary, &lines, |line| {
        serde_json::from_str(line).map_err(|e| e.to_string())
    });
    let now = std::time::SystemTime::now();
    let (mut rendered, mut declined, mut refused) = (0, 0, 0);
    let mut disagreements = Vec::new();
    for (i, (case, answer)) in cases.iter().zip(&answers).enumerate() {
        let columns = match Columns::of(&case.spec(), "v1") {
            Ok(columns) => columns,
            Err(_) => {
                declined += 1;
                continue;
            }
        };
        if answer["ok"] != true {
            // Go refuses the column: bindery must not render it either.
            refused += 1;
            disagreements.push(format!(
                "case {i}: Go refuses {:?}, bindery renders it: {}",
                answer["error"], lines[i]
            ));
            continue;
        }
        let cells = match columns.cells_of(&case.object.to_string(), now) {
            Ok(cells) => cells,
            Err(_) => {
                declined += 1;
                continue;
            }
        };
        rendered += 1;
        if Value::Array(cells.clone()) != answer["cells"] {
            disagreements.push(format!(
                "case {i}: bindery {} Go {} for {}",
                Value::Array(cells),
                answer["cells"],
                lines[i]
            ));
        }
        let definitions = &columns.definitions().as_array().unwrap()[1..];
        if Value::Array(definitions.to_vec()) != answer["columns"] {
            disagreements.push(format!(
                "case {i}: definitions {} Go {}",
                Value::Array(definitions.to_vec()),
                answer["columns"]
            ));
        }
    }
    println!(
        "table oracle: {} cases ({fixed} fixed): {rendered} rendered as Go, {declined} declined (sent to the provider), {refused} refused by Go",
        cases.len()
    );
    assert!(
        disagreements.is_empty(),
        "{} disagreements, the first:\n{}",
        disagreements.len(),
        disagreements
            .iter()
            .take(15)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        declined * 5 < cases.len(),
        "bindery declines too many cases ({declined} of {}): the cache would send most Tables on",
        cases.len()
    );
}
