//! JSON as the YAML kube-apiserver writes (sigs.k8s.io/yaml over yaml.v2):
//! block style, map keys sorted, sequences at their key's indentation,
//! strings that YAML 1.1 would read as something else double-quoted, strings
//! that cannot be plain single-quoted, multi-line strings as literals, and
//! long lines folded at a space past column 80, as yaml.v2's emitter folds.

use serde_json::Value;

/// `value` as kube-apiserver's YAML.
pub fn to_yaml(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(map) if !map.is_empty() => write_map(&mut out, map, 0),
        Value::Array(items) if !items.is_empty() => write_seq(&mut out, items, 0),
        scalar => {
            out.push_str(&scalar_text(scalar, 0, 0));
            out.push('\n');
        }
    }
    out
}

fn write_map(out: &mut String, map: &serde_json::Map<String, Value>, indent: usize) {
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort();
    for key in keys {
        let value = &map[key];
        out.push_str(&" ".repeat(indent));
        // A key is a simple key: it never folds.
        out.push_str(&string_text(key, 0, None));
        out.push(':');
        write_value_after_key(out, value, indent);
    }
}

fn write_value_after_key(out: &mut String, value: &Value, indent: usize) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            out.push('\n');
            write_map(out, map, indent + 2);
        }
        // yaml.v2 puts a sequence's dashes at its key's indentation.
        Value::Array(items) if !items.is_empty() => {
            out.push('\n');
            write_seq(out, items, indent);
        }
        scalar => {
            out.push(' ');
            let column = column_of(out);
            out.push_str(&scalar_text(scalar, column, indent + 2));
            out.push('\n');
        }
    }
}

/// The column the next character goes to: the characters since the last
/// line break.
fn column_of(out: &str) -> usize {
    let line = out.rsplit('\n').next().unwrap_or(out);
    line.chars().count()
}

fn write_seq(out: &mut String, items: &[Value], indent: usize) {
    for item in items {
        out.push_str(&" ".repeat(indent));
        out.push_str("- ");
        match item {
            Value::Object(map) if !map.is_empty() => {
                // The first key shares the dash's line.
                let mut nested = String::new();
                write_map(&mut nested, map, indent + 2);
                out.push_str(nested.trim_start());
            }
            Value::Array(inner) if !inner.is_empty() => {
                let mut nested = String::new();
                write_seq(&mut nested, inner, indent + 2);
                out.push_str(nested.trim_start());
            }
            scalar => {
                let column = column_of(out);
                out.push_str(&scalar_text(scalar, column, indent + 2));
                out.push('\n');
            }
        }
    }
}

/// A scalar that starts at `column`; lines it is folded into continue at
/// `indent`.
fn scalar_text(value: &Value, column: usize, indent: usize) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => string_text(s, column, Some(indent)),
        Value::Object(_) => "{}".into(),
        Value::Array(_) => "[]".into(),
    }
}

/// yaml.v2's `best_width`.
const WIDTH: usize = 80;

/// How a scalar's spaces may become line breaks.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Style {
    Plain,
    /// Single- or double-quoted: never at the first or last character of
    /// the value.
    Quoted,
    /// Double-quoted, where a space after the break is written `\ `.
    DoubleQuoted,
}

/// Writes `text` (a scalar as it goes on the line, quotes and escapes
/// included) from `column`, breaking at a space once the line is past
/// [`WIDTH`] and the next character is no space, as yaml.v2's emitter
/// (`yaml_emitter_write_plain_scalar` and its quoted forms) does.
fn fold(text: &str, column: usize, indent: usize, style: Style) -> String {
    let chars: Vec<char> = text.chars().collect();
    let (first, last) = match style {
        Style::Plain => (0, chars.len()),
        // The value lies between the quotes.
        Style::Quoted | Style::DoubleQuoted => (1, chars.len().saturating_sub(1)),
    };
    let mut out = String::with_capacity(text.len());
    let mut column = column;
    let mut spaces = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let inside = i >= first && i < last;
        let breakable = match style {
            Style::Plain => true,
            _ => i > first && i + 1 < last,
        };
        if c == ' ' && inside {
            let next_is_space = chars.get(i + 1) == Some(&' ');
            let next_ok = style == Style::DoubleQuoted || !next_is_space;
            if breakable && !spaces && column > WIDTH && next_ok {
                out.push('\n');
                out.push_str(&" ".repeat(indent));
                column = indent;
                if style == Style::DoubleQuoted && next_is_space {
                    out.push('\\');
                    column += 1;
                }
                spaces = true;
                i += 1;
                continue;
            }
            spaces = true;
        } else {
            spaces = false;
        }
        out.push(c);
        column += 1;
        i += 1;
    }
    out
}

/// A string scalar from `column`; `indent` is where folded lines go on,
/// `None` for a key, which never folds.
fn string_text(s: &str, column: usize, indent: Option<usize>) -> String {
    let fold = |text: &str, style| match indent {
        Some(indent) => fold(text, column, indent, style),
        None => text.to_string(),
    };
    if s.contains('\n') {
        let chomp = if s.ends_with('\n') { "" } else { "-" };
        let pad = " ".repeat(indent.unwrap_or_default());
        let body: Vec<String> = s
            .trim_end_matches('\n')
            .split('\n')
            .map(|line| {
                if line.is_empty() {
                    String::new()
                } else {
                    format!("{pad}{line}")
                }
            })
            .collect();
        return format!("|{chomp}\n{}", body.join("\n"));
    }
    if resolves_to_non_string(s) {
        return fold(&double_quoted(s), Style::DoubleQuoted);
    }
    if plain_allowed(s) {
        fold(s, Style::Plain)
    } else {
        let quoted = format!("'{}'", s.replace('\'', "''"));
        fold(&quoted, Style::Quoted)
    }
}

fn double_quoted(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

/// Whether YAML 1.1 (yaml.v2) would read the plain scalar as a non-string.
fn resolves_to_non_string(s: &str) -> bool {
    const WORDS: &[&str] = &[
        "", "~", "null", "Null", "NULL", "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO",
        "true", "True", "TRUE", "false", "False", "FALSE", "on", "On", "ON", "off", "Off", "OFF",
        ".inf", ".Inf", ".INF", "-.inf", "-.Inf", "-.INF", "+.inf", ".nan", ".NaN", ".NAN", "<<",
    ];
    if WORDS.contains(&s) {
        return true;
    }
    let unsigned = s.strip_prefix(['-', '+']).unwrap_or(s);
    let digits_only =
        |t: &str, radix: u32| !t.is_empty() && t.chars().all(|c| c == '_' || c.is_digit(radix));
    if digits_only(unsigned, 10)
        || unsigned
            .strip_prefix("0x")
            .is_some_and(|t| digits_only(t, 16))
        || unsigned
            .strip_prefix("0b")
            .is_some_and(|t| digits_only(t, 2))
    {
        return true;
    }
    if unsigned.contains(['.', 'e', 'E']) && unsigned.replace('_', "").parse::<f64>().is_ok() {
        return true;
    }
    is_timestamp(s)
}

fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 10
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && b[5].is_ascii_digit()
        && (b[6] == b'-' || (b[6].is_ascii_digit() && b.get(7) == Some(&b'-')))
}

/// libyaml's test for a plain scalar in block context, for the cases that
/// occur in Kubernetes objects.
fn plain_allowed(s: &str) -> bool {
    let first = s.chars().next().unwrap_or(' ');
    if first.is_whitespace() || s.ends_with(char::is_whitespace) {
        return false;
    }
    if "#,[]{}&*!|>'\"%@`".contains(first) {
        return false;
    }
    if matches!(first, '-' | '?' | ':') && s[1..].chars().next().is_none_or(char::is_whitespace) {
        return false;
    }
    if s.contains(": ") || s.contains(" #") || s.ends_with(':') {
        return false;
    }
    s.chars().all(|c| !c.is_control())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// kube-apiserver's YAML of its 406 for a YAML watch: a long string
    /// folds at the first space past column 80.
    #[test]
    fn long_strings_fold_as_kube_apiservers_do() {
        let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "only the following media types are accepted: application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch",
            "reason": "NotAcceptable", "code": 406});
        assert_eq!(
            to_yaml(&status),
            "apiVersion: v1\n\
             code: 406\n\
             kind: Status\n\
             message: 'only the following media types are accepted: application/json;stream=watch,\n\
             \x20 application/vnd.kubernetes.protobuf;stream=watch'\n\
             metadata: {}\n\
             reason: NotAcceptable\n\
             status: Failure\n"
        );
        let plain = "word ".repeat(30);
        let folded = to_yaml(&json!({"a": {"description": plain.trim_end()}}));
        for line in folded.lines().skip(2) {
            assert!(line.starts_with("    word"), "{folded}");
        }
        assert!(
            folded.lines().all(|l| l.chars().count() <= WIDTH + 5),
            "{folded}"
        );
        let list = to_yaml(&json!({"items": [plain.trim_end()]}));
        assert!(list.lines().nth(2).unwrap().starts_with("  word"), "{list}");
    }

    #[test]
    fn writes_as_kube_apiserver_does() {
        let value = json!({
            "kind": "Widget",
            "metadata": {"resourceVersion": "391", "creationTimestamp": "2026-11-22T19:00:17Z",
                "managedFields": [{"manager": "curl", "fieldsV1": {"f:spec": {".": {}}}}],
                "labels": {"on": "yes", "x": "a: b"}},
            "spec": {"size": "small", "replicas": 2, "empty": [], "note": "two\nlines"},
        });
        assert_eq!(
            to_yaml(&value),
            "kind: Widget\n\
             metadata:\n\
             \x20 creationTimestamp: \"2026-11-22T19:00:17Z\"\n\
             \x20 labels:\n\
             \x20   \"on\": \"yes\"\n\
             \x20   x: 'a: b'\n\
             \x20 managedFields:\n\
             \x20 - fieldsV1:\n\
             \x20     f:spec:\n\
             \x20       .: {}\n\
             \x20   manager: curl\n\
             \x20 resourceVersion: \"391\"\n\
             spec:\n\
             \x20 empty: []\n\
             \x20 note: |-\n\
             \x20   two\n\
             \x20   lines\n\
             \x20 replicas: 2\n\
             \x20 size: small\n"
        );
    }
}
