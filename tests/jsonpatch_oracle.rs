//! Differential test of `bindery::wire::patch` against the library
//! kube-apiserver v1.34 applies patches with: the Go program in
//! `tests/oracles/jsonpatch` (gopkg.in/evanphx/json-patch.v4 v4.12.0, set up
//! as kube-apiserver sets it up), built with `go build` into
//! `<target>/oracles/` and fed every case in one run. Without a Go toolchain,
//! or if the oracle does not build, this fails: it never skips.
//!
//! Cases are a few fixed ones (each quirk `src/wire/patch.rs` claims) and a
//! few thousand random (document, patch) pairs from proptest's `TestRunner`
//! with a fixed seed: nested documents with small keys; JSON patches of
//! random operations whose paths mostly exist in the document (or are `-`,
//! negative indices, a new key, or nonsense), with random, missing or `null`
//! values, and `test` values mostly taken from the document; merge patches of
//! nested objects with nulls, and some that are arrays, scalars or `null`.
//!
//! The document is sent as serde_json writes it; the oracle reads it as
//! kube-apiserver holds an object (integers that fit an int64, else float64)
//! and encodes it with Go's encoder, as kube-apiserver does before patching.
//! The patch is sent as the module assumes clients write it: Go's encoder's
//! text, with a float64 that has an integral value in int64's range written
//! with `.0` (see the module's documentation). The oracle's result is read
//! with bindery's own Go-compatible decoder, integers as int64 and other
//! numbers as float64, which is how kube-apiserver reads the patched object
//! back; so results compare as JSON values exactly, int64 against int64 and
//! float64 against float64, no tolerance needed.
//!
//! Success, failure and the result must agree, and so must the kind of
//! failure (refused by `DecodePatch`, failed, panicked; for merge patches,
//! which document or patch was refused). Go compares an object's keys in
//! random order in `test`, so where one key differs and another panics, Go
//! answers either; a failed-against-panicked disagreement is accepted only if
//! rerunning the case makes Go give bindery's answer.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[path = "oracles/runner.rs"]
mod runner;

use bindery::wire::json;
use bindery::wire::patch::{PatchError, apply_json_patch, apply_merge_patch};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{Map, Value, json};

const JSON_CASES: usize = 4000;
const MERGE_CASES: usize = 2000;
const RERUNS: usize = 64;

// ---- the oracle ----

/// The oracle, built when its sources changed.
fn oracle() -> PathBuf {
    runner::build(
        "jsonpatch",
        "gopkg.in/evanphx/json-patch.v4 v4.12.0 in the module cache, or a module proxy",
    )
}

/// Runs the oracle once over all lines; one answer per line.
fn run_oracle(binary: &Path, lines: &[String]) -> Vec<Value> {
    runner::run("jsonpatch", binary, lines, |line| {
        json::decode(line.as_bytes())
            .map(|d| d.value)
            .map_err(|e| e.to_string())
    })
}

// ---- the patch's text, as the module assumes clients write it ----

fn integral_int64(x: f64) -> bool {
    x.fract() == 0.0 && (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&x)
}

fn go_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || matches!(c, '<' | '>' | '&' | '\u{2028}' | '\u{2029}') => {
                out.push_str(&format!("\\u{:04x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn client_text(value: &Value, out: &mut String) {
    match value {
        Value::Null | Value::Bool(_) => out.push_str(&value.to_string()),
        Value::Number(n) => match n.as_i64() {
            Some(i) => out.push_str(&i.to_string()),
            None => {
                let x = n.as_f64().expect("a float");
                out.push_str(&bindery::wire::patch::go_float(x));
                if integral_int64(x) {
                    out.push_str(".0");
                }
            }
        },
        Value::String(s) => go_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                client_text(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                go_string(k, out);
                out.push(':');
                client_text(v, out);
            }
            out.push('}');
        }
    }
}

// ---- cases ----

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Json,
    Merge,
}

struct Case {
    kind: Kind,
    doc: Value,
    patch: Value,
}

impl Case {
    fn line(&self) -> String {
        let mut patch = String::new();
        client_text(&self.patch, &mut patch);
        format!(
            r#"{{"kind":"{}","doc":{},"patch":{patch}}}"#,
            match self.kind {
                Kind::Json => "json",
                Kind::Merge => "merge",
            },
            self.doc
        )
    }

    fn ours(&self) -> Result<Value, PatchError> {
        match self.kind {
            Kind::Json => apply_json_patch(&self.doc, &self.patch),
            Kind::Merge => apply_merge_patch(&self.doc, &self.patch),
        }
    }
}

/// An outcome, comparable across both sides.
#[derive(Clone, Debug, PartialEq)]
enum Outcome {
    Ok(Value),
    Decode,
    Failed,
    Panic,
    BadMergePatch,
    BadMergeDocument,
}

fn ours(case: &Case) -> Outcome {
    match case.ours() {
        Ok(v) => Outcome::Ok(v),
        Err(PatchError::Decode { .. }) => Outcome::Decode,
        Err(PatchError::Failed(_)) => Outcome::Failed,
        Err(PatchError::Panic(_)) => Outcome::Panic,
        Err(PatchError::InvalidMergePatch) => Outcome::BadMergePatch,
        Err(PatchError::InvalidDocument) => Outcome::BadMergeDocument,
    }
}

fn theirs(answer: &Value) -> Outcome {
    if answer["ok"] == json!(true) {
        return Outcome::Ok(answer["result"].clone());
    }
    if answer["panic"] == json!(true) {
        return Outcome::Panic;
    }
    match (answer["stage"].as_str(), answer["error"].as_str()) {
        (Some("decode"), _) => Outcome::Decode,
        (Some("apply"), _) => Outcome::Failed,
        (Some("merge"), Some("Invalid JSON Patch")) => Outcome::BadMergePatch,
        (Some("merge"), Some("Invalid JSON Document")) => Outcome::BadMergeDocument,
        _ => panic!("jsonpatch oracle: unexpected answer {answer}"),
    }
}

fn fixed_cases() -> Vec<Case> {
    let j = |doc: Value, patch: Value| Case {
        kind: Kind::Json,
        doc,
        patch,
    };
    let m = |doc: Value, patch: Value| Case {
        kind: Kind::Merge,
        doc,
        patch,
    };
    let big = "x".repeat(1 << 20);
    let copies = |n: usize| {
        Value::Array(
            (0..n)
                .map(|i| json!({"op": "copy", "from": "/a", "path": format!("/c{i}")}))
                .collect(),
        )
    };
    vec![
        j(json!({"a": 1}), Value::Null),
        j(json!({"a": 1}), json!({"op": "add"})),
        j(
            json!({"a": 1}),
            json!([{"op": "add", "path": "/b", "value": 1}, 1]),
        ),
        j(json!({"a": 1}), json!([null])),
        j(
            json!({"a": 1}),
            json!([{"op": "ADD", "path": "/b", "value": 1}]),
        ),
        j(
            json!({"a": 1}),
            json!([{"op": "add", "path": 1, "value": 1}]),
        ),
        j(json!([1]), json!([{"op": "add", "path": "/0", "value": 0}])),
        j(json!("x"), json!([])),
        j(Value::Null, json!([])),
        j(
            Value::Null,
            json!([{"op": "add", "path": "/a", "value": 1}]),
        ),
        j(
            Value::Null,
            json!([{"op": "test", "path": "", "value": {}}]),
        ),
        j(json!({"a": 1.0, "b": 1.5, "c": 1e19, "d": -0.0}), json!([])),
        j(json!({}), json!([{"op": "add", "path": "", "value": {}}])),
        j(json!({}), json!([{"op": "add", "path": "x/b", "value": 1}])),
        j(json!({}), json!([{"op": "add", "path": "/", "value": 1}])),
        j(
            json!({}),
            json!([{"op": "add", "path": "/~01", "value": 1}, {"op": "add", "path": "/~2", "value": 1}]),
        ),
        j(
            json!({}),
            json!([{"op": "add", "path": "/a", "value": null}, {"op": "add", "path": "/a/b", "value": 1}]),
        ),
        j(
            json!({}),
            json!([{"op": "add", "path": "/a"}, {"op": "add", "path": "/a/b", "value": 1}]),
        ),
        j(
            json!({"a": [1, 2]}),
            json!([{"op": "add", "path": "/a/-1", "value": 9}]),
        ),
        j(
            json!({"a": [1, 2]}),
            json!([{"op": "add", "path": "/a/-3", "value": 9}]),
        ),
        j(
            json!({"a": [1, 2]}),
            json!([{"op": "add", "path": "/a/-4", "value": 9}]),
        ),
        j(
            json!({"a": [1, 2]}),
            json!([{"op": "add", "path": "/a/+01", "value": 9}]),
        ),
        j(
            json!({"a": [1, 2]}),
            json!([{"op": "add", "path": "/a/99999999999999999999", "value": 9}]),
        ),
        j(
            json!({"a": 1}),
            json!([{"op": "replace", "path": "/b", "value": 2}]),
        ),
        j(
            json!({"a": 1}),
            json!([{"op": "replace", "path": "", "value": 5}]),
        ),
        j(
            json!({"a": 1}),
            json!([{"op": "replace", "path": "", "value": null}]),
        ),
        j(
            json!({"a": 1}),
            json!([{"op": "replace", "path": "", "value": [1]}]),
        ),
        j(json!({"a": 1}), json!([{"op": "replace", "path": ""}])),
        j(
            json!({"a": null}),
            json!([{"op": "move", "from": "/a", "path": "/b"}]),
        ),
        j(
            json!({"a": {}}),
            json!([{"op": "move", "from": "/a", "path": "/a/b"}]),
        ),
        j(
            json!([1, 2, 3]),
            json!([{"op": "move", "from": "/0", "path": "/2"}]),
        ),
        j(
            json!({"a": [1]}),
            json!([{"op": "copy", "from": "/x", "path": "/c"}]),
        ),
        j(
            json!({}),
            json!([{"op": "add", "path": "/a", "value": null}, {"op": "copy", "from": "/a", "path": "/b"}, {"op": "test", "path": "/b", "value": {}}]),
        ),
        j(
            json!({}),
            json!([{"op": "add", "path": "/a", "value": null}, {"op": "copy", "from": "/a", "path": "/b"}, {"op": "test", "path": "/b", "value": null}]),
        ),
        j(
            json!({}),
            json!([{"op": "add", "path": "/a", "value": null}, {"op": "copy", "from": "/a", "path": "/b"}, {"op": "replace", "path": "/b/c", "value": 1}]),
        ),
        j(json!({ "a": big }), copies(2)),
        j(json!({ "a": big }), copies(3)),
        j(
            json!({"a": 1}),
            json!([{"op": "test", "path": "/a", "value": 1.0}]),
        ),
        j(
            json!({"a": 1.0}),
            json!([{"op": "test", "path": "/a", "value": 1}]),
        ),
        j(
            json!({"a": "<&>\u{2028}"}),
            json!([{"op": "test", "path": "/a", "value": "<&>\u{2028}"}]),
        ),
        j(
            json!({}),
            json!([{"op": "test", "path": "/a", "value": null}]),
        ),
        j(json!({}), json!([{"op": "test", "path": "/a"}])),
        j(json!({"a": 1}), json!([{"op": "test", "path": "/a"}])),
        j(json!({"a": 1}), json!([{"op": "test", "path": ""}])),
        j(
            json!({"a": {}}),
            json!([{"op": "add", "path": "/a/b", "value": null}, {"op": "test", "path": "/a", "value": {"b": null}}]),
        ),
        j(
            json!({"a": [null]}),
            json!([{"op": "test", "path": "/a", "value": [null]}]),
        ),
        j(
            json!({"a": [1]}),
            json!([{"op": "test", "path": "/a", "value": [null]}]),
        ),
        j(
            json!({"a": [1, null]}),
            json!([{"op": "test", "path": "/a", "value": [2, null]}]),
        ),
        m(json!({"a": {}}), json!({"a": [{"b": null}]})),
        m(json!({"a": 1}), json!({"a": [{"b": null}]})),
        m(json!({"a": null}), json!({"a": {"b": null}})),
        m(json!({"a": 1}), Value::Null),
        m(json!({"a": 1}), json!("s")),
        m(json!({"a": 1}), json!([{"b": null}, null])),
        m(Value::Null, json!({})),
        m(json!(1), Value::Null),
        m(json!([1]), json!({"a": null, "b": {"c": null}})),
        m(json!({"a": 1.0, "b": 2.5}), json!({"c": 3.0})),
    ]
}

// -- random cases --

const KEYS: &[&str] = &["a", "b", "c", "0", "1", "-", "", "~", "/", "a/b", "~1"];
const STRINGS: &[&str] = &[
    "", "a", "b", "<&>", "é", "\u{2028}", "\"\\", "\n\u{1}", "1", "x y",
];
const FLOATS: &[f64] = &[
    0.5,
    1.0,
    -0.0,
    2.0,
    3.0,
    -2.5,
    1e21,
    1.5e-7,
    1e-6,
    1e19,
    123.456,
    9007199254740993.0,
];

fn object(map: BTreeMap<String, Value>) -> Value {
    Value::Object(map.into_iter().collect())
}

fn key() -> impl Strategy<Value = String> + Clone {
    proptest::sample::select(KEYS).prop_map(str::to_string)
}

fn value(nulls: u32) -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        nulls => Just(Value::Null),
        2 => any::<bool>().prop_map(Value::Bool),
        4 => prop_oneof![-2i64..3, Just(i64::MAX), Just(i64::MIN), Just(1_000_000)].prop_map(Value::from),
        2 => proptest::sample::select(FLOATS).prop_map(|f| json!(f)),
        3 => proptest::sample::select(STRINGS).prop_map(|s| json!(s)),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map(key(), inner, 0..4).prop_map(object),
        ]
    })
    .boxed()
}

fn document() -> BoxedStrategy<Value> {
    prop_oneof![
        40 => proptest::collection::btree_map(key(), value(1), 0..6).prop_map(object),
        4 => proptest::collection::vec(value(1), 0..5).prop_map(Value::Array),
        1 => Just(Value::Null),
        1 => value(0),
    ]
    .boxed()
}

fn sample<T>(runner: &mut TestRunner, strategy: &impl Strategy<Value = T>) -> T {
    strategy.new_tree(runner).expect("a value").current()
}

fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// Every node of a value: its path and the value.
fn nodes<'v>(value: &'v Value, path: String, out: &mut Vec<(String, &'v Value)>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                nodes(v, format!("{path}/{}", escape(k)), out);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                nodes(v, format!("{path}/{i}"), out);
            }
        }
        _ => {}
    }
    out.push((path, value));
}

fn pick<'a, T>(runner: &mut TestRunner, items: &'a [T]) -> &'a T {
    &items[runner.rng().random_range(0..items.len())]
}

/// A path: mostly one in the document, or under one of its containers (a
/// new key, `-`, an index at or past the end, a negative one), or not.
fn path(runner: &mut TestRunner, nodes: &[(String, &Value)]) -> String {
    let roll = runner.rng().random_range(0..100);
    let (existing, node) = pick(runner, nodes).clone();
    match roll {
        0..55 => existing,
        55..75 => match node {
            Value::Array(items) => {
                let len = items.len() as i64;
                let choices = [
                    "-".to_string(),
                    len.to_string(),
                    (len + 1).to_string(),
                    "-1".to_string(),
                    (-len).to_string(),
                    (-len - 1).to_string(),
                    runner.rng().random_range(-len - 1..=len).to_string(),
                ];
                format!("{existing}/{}", pick(runner, &choices))
            }
            _ => {
                let key = pick::<&str>(runner, KEYS);
                format!("{existing}/{}", escape(key))
            }
        },
        75..85 => {
            let depth = runner.rng().random_range(1..4);
            (0..depth)
                .map(|_| {
                    let tokens = ["a", "b", "0", "1", "-", "-1", "x", "~1", "~0", "+0"];
                    format!("/{}", pick(runner, &tokens))
                })
                .collect()
        }
        _ => {
            let weird = [
                "", "/", "a", "a/b", "//", "/~", "/-/a", "/0/0/0", "/+1", "/01", "/a/-2",
            ];
            pick(runner, &weird).to_string()
        }
    }
}

/// Every integer of a value made a float (`1` becomes `1.0`).
fn floated(value: &Value) -> Value {
    match value {
        Value::Number(n) => n.as_i64().map_or(value.clone(), |i| json!(i as f64)),
        Value::Array(items) => Value::Array(items.iter().map(floated).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), floated(v))).collect())
        }
        other => other.clone(),
    }
}

fn json_case(runner: &mut TestRunner) -> Case {
    let doc = sample(runner, &document());
    let roll = runner.rng().random_range(0..100);
    if roll < 3 {
        let patch = sample(
            runner,
            &prop_oneof![
                Just(Value::Null),
                value(1),
                Just(json!([null])),
                Just(json!([1, {}]))
            ],
        );
        return Case {
            kind: Kind::Json,
            doc,
            patch,
        };
    }
    let mut all = Vec::new();
    nodes(&doc, String::new(), &mut all);
    let count = runner.rng().random_range(0..5);
    let mut ops = Vec::new();
    for _ in 0..count {
        let mut op = Map::new();
        let kinds = ["add", "remove", "replace", "move", "copy", "test"];
        let kind = *pick(runner, &kinds);
        match runner.rng().random_range(0..100) {
            0..96 => op.insert("op".into(), json!(kind)),
            96 => None,
            97 => op.insert("op".into(), json!("foo")),
            98 => op.insert("op".into(), json!(1)),
            _ => op.insert("op".into(), Value::Null),
        };
        let at = path(runner, &all);
        match runner.rng().random_range(0..100) {
            0..95 => op.insert("path".into(), json!(at)),
            95..98 => None,
            _ => op.insert("path".into(), json!(7)),
        };
        if (matches!(kind, "move" | "copy") || runner.rng().random_range(0..10) == 0)
            && runner.rng().random_range(0..20) > 0
        {
            let from = path(runner, &all);
            op.insert("from".into(), json!(from));
        }
        let wants_value = matches!(kind, "add" | "replace" | "test");
        let roll = runner.rng().random_range(0..100);
        if (wants_value && roll < 85) || (!wants_value && roll < 10) {
            let existing = all
                .iter()
                .find(|(p, _)| *p == at)
                .map(|(_, v)| (*v).clone());
            let value = match (kind, existing) {
                ("test", Some(v)) if roll < 45 => v,
                ("test", Some(v)) if roll < 60 => floated(&v),
                _ => sample(runner, &value(1)),
            };
            op.insert("value".into(), value);
        } else if wants_value && roll < 93 {
            op.insert("value".into(), Value::Null);
        }
        ops.push(Value::Object(op));
    }
    Case {
        kind: Kind::Json,
        doc,
        patch: Value::Array(ops),
    }
}

fn merge_case(runner: &mut TestRunner) -> Case {
    let doc = sample(runner, &document());
    let patch = sample(
        runner,
        &prop_oneof![
            80 => proptest::collection::btree_map(key(), value(3), 0..5).prop_map(object),
            7 => proptest::collection::vec(value(3), 0..4).prop_map(Value::Array),
            5 => Just(Value::Null),
            8 => value(0),
        ],
    );
    Case {
        kind: Kind::Merge,
        doc,
        patch,
    }
}

#[test]
fn jsonpatch_agrees_with_kube_apiservers_library() {
    let binary = oracle();
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[0x6b; 32]),
    );
    let mut cases = fixed_cases();
    let fixed = cases.len();
    cases.extend((0..JSON_CASES).map(|_| json_case(&mut runner)));
    cases.extend((0..MERGE_CASES).map(|_| merge_case(&mut runner)));

    let lines: Vec<String> = cases.iter().map(Case::line).collect();
    let answers = run_oracle(&binary, &lines);

    let mut disagreements = Vec::new();
    let mut order_dependent = Vec::new();
    let (mut succeeded, mut panicked) = (0, 0);
    for (i, (case, answer)) in cases.iter().zip(&answers).enumerate() {
        let (ours, theirs) = (ours(case), theirs(answer));
        if ours == theirs {
            succeeded += matches!(ours, Outcome::Ok(_)) as usize;
            panicked += (ours == Outcome::Panic) as usize;
        } else if case.kind == Kind::Json
            && matches!(
                (&ours, &theirs),
                (Outcome::Failed, Outcome::Panic) | (Outcome::Panic, Outcome::Failed)
            )
        {
            order_dependent.push(i);
        } else {
            disagreements.push((i, ours, theirs));
        }
    }
    // Go's random key order: rerun, and accept bindery's answer if Go gives it.
    let reruns: Vec<String> = order_dependent
        .iter()
        .flat_map(|&i| std::iter::repeat_n(lines[i].clone(), RERUNS))
        .collect();
    let rerun_answers = run_oracle(&binary, &reruns);
    for (n, &i) in order_dependent.iter().enumerate() {
        let ours = ours(&cases[i]);
        let answers = &rerun_answers[n * RERUNS..(n + 1) * RERUNS];
        if !answers.iter().any(|a| theirs(a) == ours) {
            disagreements.push((i, ours, theirs(&answers[0])));
        }
    }

    for (i, ours, theirs) in disagreements.iter().take(20) {
        eprintln!(
            "case {i}{}:\n  {}\n  bindery: {ours:?}\n  Go:      {theirs:?}",
            if *i < fixed { " (fixed)" } else { "" },
            lines[*i].chars().take(2000).collect::<String>()
        );
    }
    assert!(
        disagreements.is_empty(),
        "jsonpatch oracle: {} of {} cases disagree",
        disagreements.len(),
        cases.len()
    );
    println!(
        "jsonpatch oracle: {} cases agree ({fixed} fixed, {JSON_CASES} JSON patches, \
         {MERGE_CASES} merge patches; {succeeded} applied, {panicked} Go panics, {} \
         decided by Go's map order)",
        cases.len(),
        order_dependent.len()
    );
}
