//! Differential test of `bindery::wire::selector` against the packages
//! kube-apiserver v1.34.10 reads selectors with: the Go program in
//! `tests/oracles/selectors` (k8s.io/apimachinery v0.34.10, pinned in its
//! go.mod, the query decoded into `ListOptions` by the same
//! `ParameterCodec` kube-apiserver's list handler uses, an error answered
//! as `errors.NewBadRequest(err.Error())`), built with `go build` into
//! `<target>/oracles/` and fed every case in one run. Without a Go
//! toolchain, or if the oracle does not build, this fails: it never skips.
//!
//! Cases are the fixed ones below (each quirk the module claims) and a few
//! thousand random ones from proptest's `TestRunner` with a fixed seed:
//! label selectors of random requirements (keys valid and not: prefixes
//! with dots and slashes, too long, unicode, `in` and `notin`; every
//! operator and some that are not; values valid and not, integers, empty
//! pieces in sets), joined by commas and blanks (and NULs, no-break
//! spaces), some then mutated character by character; field selectors of
//! random terms with every escape and some that are not; and random label
//! sets to match them against.
//!
//! For every case both must accept it or refuse it; a refusal must be in
//! the same words (the whole text of the 400), and the 400 must be
//! kube-apiserver's (`BadRequest`). An accepted selector must match the
//! same labels, and be written back as Go's `String()` writes it; the one
//! exception is the order of label requirements with the same key in a
//! selector of more than 12 (Go's sort is not stable there), where what
//! Go wrote must parse to the same requirements as ours.
//!
//! `SELECTORS_ORACLE_HISTOGRAM=1` prints how many refusals of each shape
//! the cases drew, to see which paths of the parsers they reach.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[path = "oracles/runner.rs"]
mod runner;

use bindery::wire::selector::{parse_field_selector, parse_label_selector};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{Value, json};

const LABEL_CASES: usize = 4000;
const FIELD_CASES: usize = 2000;

// ---- the oracle ----

/// The oracle, built when its sources changed.
fn oracle() -> PathBuf {
    runner::build(
        "selectors",
        "it needs k8s.io/apimachinery v0.34.10 and its dependencies in the module cache, or a module proxy",
    )
}

/// Runs the oracle once over all lines; one answer per line.
fn run_oracle(binary: &Path, lines: &[String]) -> Vec<Value> {
    runner::run("selectors", binary, lines, |line| {
        serde_json::from_str(line).map_err(|e| e.to_string())
    })
}

// ---- cases ----

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Kind {
    Label,
    Field,
}

struct Case {
    kind: Kind,
    text: String,
    labels: BTreeMap<String, String>,
}

impl Case {
    fn line(&self) -> String {
        json!({
            "kind": match self.kind { Kind::Label => "label", Kind::Field => "field" },
            "text": self.text,
            "labels": self.labels,
        })
        .to_string()
    }
}

/// Both sides' answer: the 400's message, or the selector written back and
/// whether it matched.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    Refused(String),
    Parsed { string: String, matches: bool },
}

fn ours(case: &Case) -> Outcome {
    let parsed = match case.kind {
        Kind::Label => {
            parse_label_selector(&case.text).map(|s| (s.encode(), s.matches(&case.labels)))
        }
        Kind::Field => {
            parse_field_selector(&case.text).map(|s| (s.encode(), s.matches(&case.labels)))
        }
    };
    match parsed {
        Ok((string, matches)) => Outcome::Parsed { string, matches },
        Err(message) => Outcome::Refused(message),
    }
}

fn theirs(answer: &Value) -> Outcome {
    if answer["ok"] == json!(true) {
        return Outcome::Parsed {
            string: answer["string"].as_str().expect("string").to_string(),
            matches: answer["matches"].as_bool().expect("matches"),
        };
    }
    assert_eq!(
        (answer["code"].as_i64(), answer["reason"].as_str()),
        (Some(400), Some("BadRequest")),
        "selectors oracle: every refusal is a 400 BadRequest: {answer}"
    );
    Outcome::Refused(answer["error"].as_str().expect("error").to_string())
}

/// Whether Go's `String()` of a label selector differs from ours only in
/// the order of requirements with the same key, which Go's unstable sort
/// may give in another order beyond 12 requirements.
fn same_requirements_reordered(text: &str, ours: &str, go: &str) -> bool {
    let Ok(selector) = parse_label_selector(text) else {
        return false;
    };
    let requirements = selector.requirements();
    if requirements.len() <= 12 {
        return false;
    }
    let Ok(go) = parse_label_selector(go) else {
        return false;
    };
    let sorted = |s: &[bindery::wire::selector::Requirement]| {
        let mut all: Vec<String> = s.iter().map(|r| r.to_string()).collect();
        all.sort();
        all
    };
    ours != go.encode() && sorted(requirements) == sorted(go.requirements())
}

fn fixed_cases() -> Vec<Case> {
    let label = |text: &str, labels: &[(&str, &str)]| Case {
        kind: Kind::Label,
        text: text.to_string(),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    };
    let field = |text: &str, labels: &[(&str, &str)]| Case {
        kind: Kind::Field,
        ..label(text, labels)
    };
    let long = "x".repeat(64);
    let mut cases = vec![
        label("a=(", &[]),
        label("", &[]),
        label(" \t\r\n", &[("a", "b")]),
        label("a=b", &[("a", "b")]),
        label("a==b", &[("a", "b")]),
        label("a!=b", &[]),
        label("a in (c,b,b)", &[("a", "c")]),
        label("a notin (b)", &[("a", "c")]),
        label("a", &[("a", "")]),
        label("!a", &[]),
        label("a>5", &[("a", "+6")]),
        label("a<5", &[("a", "-6")]),
        label("a>5", &[("a", "x")]),
        label("a>-1", &[]),
        label("a>x", &[]),
        label("a>-x", &[]),
        label("a<", &[]),
        label("a in ()", &[("a", "")]),
        label("a in (,)", &[("a", "")]),
        label("a in (b,,c)", &[("a", "")]),
        label("in in (in, notin)", &[("in", "notin")]),
        label("!a=b", &[]),
        label("a,", &[]),
        label(",a", &[]),
        label("a=b,,c", &[]),
        label("!", &[]),
        label("!!a", &[]),
        label("a b", &[]),
        label("a gt 5", &[]),
        label("a in b", &[]),
        label("a notin", &[]),
        label("a in (=", &[]),
        label("a in (b", &[]),
        label("a in (b c)", &[]),
        label("a in (b,=)", &[]),
        label("a=)", &[]),
        label("a in ()x", &[]),
        label("a!==b", &[]),
        label("a\0b", &[]),
        label("a=b\0 garbage(", &[]),
        label("a=b \0garbage(", &[("a", "b")]),
        label("a=\0b", &[("a", "b")]),
        label("a,\0", &[]),
        label("a\u{a0}=b", &[]),
        label("é\u{200b}\u{1}\u{1f600}\u{e0001}=v", &[]),
        label("-a=v", &[]),
        label("/b=v", &[]),
        label("A/b=v", &[]),
        label("a/=v", &[]),
        label("a/b/c=v", &[]),
        label(&format!("{long}=v"), &[]),
        label(&format!("{}/a=v", "p".repeat(254)), &[]),
        label(&format!("a={long}"), &[]),
        label("a in (_,ok,-)", &[]),
        label("b=1,a,!c,a=2", &[("a", "2"), ("b", "1")]),
        field("bogus", &[]),
        field("", &[]),
        field(",", &[]),
        field("=", &[]),
        field("!=", &[]),
        field("!=,a=b", &[("a", "b")]),
        field("=x", &[("", "x")]),
        field("a!b=c", &[("a!b", "c")]),
        field("a\\,b=c", &[]),
        field("b=1,a=2", &[("a", "2"), ("b", "1")]),
        field(" a = b ", &[(" a ", " b ")]),
        field("a=b,c", &[]),
        field("a=b=c", &[]),
        field("a!==b", &[]),
        field("a=\\x", &[]),
        field("a=\\é", &[]),
        field("a=b\\", &[]),
        field("z=1,y,x=\\q", &[]),
        field(
            "spec.x==a\\,b,metadata.name!=n\\=\\\\,z=",
            &[("spec.x", "a,b")],
        ),
        field("metadata.name=a\0b", &[("metadata.name", "a\0b")]),
    ];
    // Go's unstable sort: 13 requirements, many with one key.
    let many: Vec<String> = (0..13)
        .map(|i| format!("{}={i}", ["a", "b"][i % 2]))
        .collect();
    cases.push(label(&many.join(","), &[("a", "0")]));
    cases
}

// -- random cases --

fn pick<'a, T>(runner: &mut TestRunner, items: &'a [T]) -> &'a T {
    &items[runner.rng().random_range(0..items.len())]
}

/// Mostly one of the first, sometimes one of the second.
fn either<'a>(runner: &mut TestRunner, usual: &[&'a str], odd: &[&'a str]) -> &'a str {
    let from = if chance(runner, 88) { usual } else { odd };
    from[runner.rng().random_range(0..from.len())]
}

fn chance(runner: &mut TestRunner, percent: u32) -> bool {
    runner.rng().random_range(0..100) < percent
}

/// Label keys: those kube-apiserver accepts, then those it does not.
fn label_keys() -> (Vec<String>, Vec<String>) {
    let subdomain = |last: usize| {
        format!(
            "{}.{}.{}.{}",
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63),
            "d".repeat(last)
        )
    };
    let mut valid: Vec<String> = [
        "a",
        "b",
        "app",
        "in",
        "notin",
        "x.y",
        "a_b",
        "a-b",
        "A1",
        "1",
        "gt",
        "example.com/a",
        "k8s.io/app",
        "a.b-c/Z_9",
    ]
    .map(str::to_string)
    .to_vec();
    valid.push("k".repeat(63));
    valid.push(format!("{}/k", subdomain(61)));
    let mut odd: Vec<String> = [
        "Ex.com/a",
        "-x.com/a",
        "x..y/a",
        "/a",
        "a/",
        "/",
        "a/b/c",
        "-a",
        "a-",
        "_a",
        ".a",
        "a.",
        "é",
        "a\u{200b}",
        "ab\u{1f600}",
        "a\u{7f}",
        "k\\",
    ]
    .map(str::to_string)
    .to_vec();
    odd.push("k".repeat(64));
    odd.push(format!("{}/k", subdomain(62)));
    odd.push(format!("{}/k", "a".repeat(64)));
    (valid, odd)
}

/// Label values: those kube-apiserver accepts, then those it does not.
fn label_values() -> (Vec<String>, Vec<String>) {
    let mut valid: Vec<String> = [
        "",
        "x",
        "y",
        "v1",
        "5",
        "12",
        "0",
        "007",
        "99999999999999999999",
        "in",
        "notin",
        "a.b",
        "a_b",
    ]
    .map(str::to_string)
    .to_vec();
    valid.push("v".repeat(63));
    let mut odd: Vec<String> = [
        "-1",
        "+3",
        "-9223372036854775808",
        "_x",
        "x_",
        "x-",
        "é",
        "a\u{a0}b",
        "a/b",
        "x\\",
    ]
    .map(str::to_string)
    .to_vec();
    odd.push("v".repeat(64));
    (valid, odd)
}

/// Mostly one of the valid, sometimes one of the odd.
struct Choices {
    valid: Vec<String>,
    odd: Vec<String>,
    all: Vec<String>,
}

impl Choices {
    fn new((valid, odd): (Vec<String>, Vec<String>)) -> Self {
        let all = [valid.clone(), odd.clone()].concat();
        Self { valid, odd, all }
    }

    fn pick(&self, runner: &mut TestRunner) -> String {
        let from = if chance(runner, 85) {
            &self.valid
        } else {
            &self.odd
        };
        pick(runner, from).clone()
    }
}

const BLANKS: &[&str] = &[" ", " ", "  ", "\t", "\n", "\r"];
const ODD_BLANKS: &[&str] = &["\u{a0}", "\0", "\u{3000}", "\u{b}"];
const NOISE: &[char] = &[
    '=', '!', '(', ')', ',', '<', '>', ' ', '\t', '\0', '\\', 'a', 'é', '-', '/', '.', 'i', 'n',
];

fn blank(runner: &mut TestRunner) -> String {
    if chance(runner, 70) {
        String::new()
    } else {
        either(runner, BLANKS, ODD_BLANKS).to_string()
    }
}

fn requirement(runner: &mut TestRunner, keys: &Choices, values: &Choices) -> String {
    let key = keys.pick(runner);
    let value = |runner: &mut TestRunner| values.pick(runner);
    let (b1, b2, b3) = (blank(runner), blank(runner), blank(runner));
    match runner.rng().random_range(0..100) {
        0..15 => format!("{b1}{key}{b2}"),
        15..25 => format!("{b1}!{b2}{key}{b3}"),
        25..65 => {
            let operator = either(
                runner,
                &["=", "==", "!=", ">", "<", "=", "!="],
                &["=!", "<>", " gt ", " ", "===", "=<"],
            );
            format!("{b1}{key}{b2}{operator}{b3}{}", value(runner))
        }
        65..95 => {
            let operator = either(
                runner,
                &[" in ", " notin ", "\tin\t", " in"],
                &["in", " notin", " IN ", " ! ", " in=", " notin("],
            );
            let count = runner.rng().random_range(0..5);
            let mut set = String::new();
            for i in 0..count {
                if i > 0 {
                    set.push_str(either(
                        runner,
                        &[",", ",", ", ", " ,", ",,"],
                        &["", "(", ")"],
                    ));
                }
                set.push_str(&value(runner));
            }
            if chance(runner, 10) {
                set.insert(0, ',');
            }
            if chance(runner, 10) {
                set.push(',');
            }
            let open = if chance(runner, 95) { "(" } else { "" };
            let close = if chance(runner, 95) { ")" } else { "" };
            format!("{b1}{key}{operator}{open}{set}{close}{b2}")
        }
        _ => value(runner),
    }
}

/// Inserts, deletes or replaces characters at random places.
fn mutate(runner: &mut TestRunner, text: &mut String) {
    let times = runner.rng().random_range(1..4);
    for _ in 0..times {
        let boundaries: Vec<usize> = text
            .char_indices()
            .map(|(i, _)| i)
            .chain([text.len()])
            .collect();
        let at = *pick(runner, &boundaries);
        let noise = *pick(runner, NOISE);
        match runner.rng().random_range(0..3) {
            0 => text.insert(at, noise),
            _ if at < text.len() => {
                let removed = text.remove(at);
                if runner.rng().random_range(0..2) == 0 {
                    text.insert(at, if removed == noise { 'b' } else { noise });
                }
            }
            _ => text.push(noise),
        }
    }
}

fn labels_to_match(
    runner: &mut TestRunner,
    keys: &[String],
    values: &[String],
) -> BTreeMap<String, String> {
    let count = runner.rng().random_range(0..5);
    (0..count)
        .map(|_| (pick(runner, keys).clone(), pick(runner, values).clone()))
        .collect()
}

fn label_case(runner: &mut TestRunner, keys: &Choices, values: &Choices) -> Case {
    let count = match runner.rng().random_range(0..100) {
        0..5 => 0,
        5..95 => runner.rng().random_range(1..5),
        _ => runner.rng().random_range(5..20),
    };
    let mut text = String::new();
    for i in 0..count {
        if i > 0 {
            text.push_str(either(
                runner,
                &[",", ",", ",", ", ", " ,"],
                &[",,", "", " ", "!"],
            ));
        }
        text.push_str(&requirement(runner, keys, values));
    }
    if chance(runner, 15) {
        mutate(runner, &mut text);
    }
    // Labels mostly about the keys the selector names.
    let mut labels = labels_to_match(runner, &keys.all, &values.all);
    if let Ok(selector) = parse_label_selector(&text) {
        for requirement in selector.requirements() {
            if chance(runner, 60) {
                let value = match requirement.values() {
                    [] => values.pick(runner),
                    some => pick(runner, some).clone(),
                };
                labels.insert(requirement.key().to_string(), value);
            }
        }
    }
    Case {
        kind: Kind::Label,
        text,
        labels,
    }
}

fn field_case(runner: &mut TestRunner, values: &Choices) -> Case {
    let keys: Vec<String> = [
        "metadata.name",
        "metadata.namespace",
        "spec.x",
        "status.phase",
        "",
        "a!b",
        "a\\,b",
        "a\\",
        "é",
        " metadata.name",
        "a\\=b",
    ]
    .map(str::to_string)
    .to_vec();
    let (pieces, odd_pieces) = (
        ["x", "y", "", "\\\\", "\\,", "\\=", "é", " ", "\0", "!"],
        [",", "=", "\\", "\\x", "\\é", "=="],
    );
    let count = runner.rng().random_range(0..5);
    let mut text = String::new();
    let mut wanted = BTreeMap::new();
    for i in 0..count {
        if i > 0 {
            text.push_str(either(runner, &[",", ",", ",,"], &["\\,", ""]));
        }
        let key = pick(runner, &keys).clone();
        let operator = either(runner, &["=", "==", "!=", "="], &["", "!", "=!"]);
        let mut value = String::new();
        for _ in 0..runner.rng().random_range(0..4) {
            value.push_str(either(runner, &pieces, &odd_pieces));
        }
        text.push_str(&format!("{key}{operator}{value}"));
        wanted.insert(key, value.replace('\\', ""));
    }
    if chance(runner, 15) {
        mutate(runner, &mut text);
    }
    let mut labels = labels_to_match(runner, &keys, &values.all);
    for (key, value) in wanted {
        if chance(runner, 50) {
            labels.insert(key, value);
        }
    }
    Case {
        kind: Kind::Field,
        text,
        labels,
    }
}

#[test]
fn selectors_agree_with_kube_apiservers_parsers() {
    let binary = oracle();
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[0x5e; 32]),
    );
    let (keys, values) = (Choices::new(label_keys()), Choices::new(label_values()));
    let mut cases = fixed_cases();
    let fixed = cases.len();
    cases.extend((0..LABEL_CASES).map(|_| label_case(&mut runner, &keys, &values)));
    cases.extend((0..FIELD_CASES).map(|_| field_case(&mut runner, &values)));

    let lines: Vec<String> = cases.iter().map(Case::line).collect();
    let answers = run_oracle(&binary, &lines);

    let mut disagreements = Vec::new();
    let (mut parsed, mut matched, mut reordered) = (BTreeMap::new(), 0, 0);
    for (i, (case, answer)) in cases.iter().zip(&answers).enumerate() {
        let (ours, theirs) = (ours(case), theirs(answer));
        match (&ours, &theirs) {
            _ if ours == theirs => {
                if let Outcome::Parsed { matches, .. } = ours {
                    *parsed.entry(case.kind).or_insert(0) += 1;
                    matched += matches as usize;
                }
            }
            (
                Outcome::Parsed {
                    string: a,
                    matches: m,
                },
                Outcome::Parsed {
                    string: b,
                    matches: n,
                },
            ) if m == n
                && case.kind == Kind::Label
                && same_requirements_reordered(&case.text, a, b) =>
            {
                *parsed.entry(case.kind).or_insert(0) += 1;
                reordered += 1;
            }
            _ => disagreements.push((i, ours, theirs)),
        }
    }
    for (i, ours, theirs) in disagreements.iter().take(20) {
        eprintln!(
            "case {i}{}:\n  {}\n  bindery: {ours:?}\n  Go:      {theirs:?}",
            if *i < fixed { " (fixed)" } else { "" },
            lines[*i]
        );
    }
    assert!(
        disagreements.is_empty(),
        "selectors oracle: {} of {} cases disagree",
        disagreements.len(),
        cases.len()
    );
    if std::env::var_os("SELECTORS_ORACLE_HISTOGRAM").is_some() {
        let mut shapes: BTreeMap<String, usize> = BTreeMap::new();
        for (case, answer) in cases.iter().zip(&answers) {
            if let Outcome::Refused(m) = theirs(answer) {
                let shape: String = m.split('\'').step_by(2).collect::<Vec<_>>().join("'_'");
                let shape: String = shape.chars().take(90).collect();
                *shapes
                    .entry(format!("{:?} {shape}", case.kind))
                    .or_default() += 1;
            }
        }
        for (shape, n) in shapes {
            eprintln!("{n:5} {shape}");
        }
    }
    let (labels, fields) = (parsed[&Kind::Label], parsed[&Kind::Field]);
    println!(
        "selectors oracle: {} cases agree ({fixed} fixed, {LABEL_CASES} label selectors, \
         {FIELD_CASES} field selectors; {labels} label and {fields} field selectors parsed, \
         {matched} of them matched, {} refused in the same words; {reordered} written with \
         same-key requirements in another order)",
        cases.len(),
        cases.len() - labels - fields
    );
}
