//! What may differ between the reference and bindery, and nothing more: uids,
//! resourceVersions, timestamps, continue tokens, ages and the server address.

use serde_json::Value;

const PLACEHOLDER_KEYS: &[&str] = &[
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "time",
    "continue",
];

/// Normalizes a JSON value in place.
pub fn json(value: &mut Value) {
    generated_name(value);
    match value {
        Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                if PLACEHOLDER_KEYS.contains(&key.as_str())
                    && item.as_str().is_some_and(|s| !s.is_empty())
                {
                    *item = Value::String(format!("<{key}>"));
                } else {
                    json(item);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(json),
        Value::String(text) => *text = text_line(text),
        _ => {}
    }
}

/// Normalizes free text (kubectl output, plain-text bodies).
pub fn text(input: &str) -> String {
    input.lines().map(text_line).collect::<Vec<_>>().join("\n")
}

fn text_line(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    // Server addresses: https://127.0.0.1:<port>[/clusters/<id>]
    while let Some(i) = rest.find("https://127.0.0.1:") {
        out.push_str(&rest[..i]);
        let tail = &rest[i + "https://127.0.0.1:".len()..];
        let port_end = tail
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(tail.len());
        let mut tail = &tail[port_end..];
        if let Some(after) = tail.strip_prefix("/clusters/") {
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .unwrap_or(after.len());
            tail = &after[end..];
        }
        out.push_str("<server>");
        rest = tail;
    }
    out.push_str(rest);
    words(&out)
}

/// Replaces word-shaped volatile values: uids, RFC 3339 times, ages, numbers
/// after `resourceVersion`.
fn words(line: &str) -> String {
    let mut out = Vec::new();
    for word in line.split(' ') {
        let trimmed = word.trim_matches(|c: char| "\"',;:.()[]{}".contains(c));
        let replacement = if is_uid(trimmed) {
            Some("<uid>")
        } else if is_time(trimmed) {
            Some("<time>")
        } else if is_age(trimmed) {
            Some("<age>")
        } else {
            None
        };
        match replacement {
            Some(r) if !trimmed.is_empty() => out.push(word.replace(trimmed, r)),
            _ => out.push(word.to_string()),
        }
    }
    let joined = out.join(" ");
    [
        "resourceVersion: \"",
        "\"resourceVersion\": \"",
        "resourceVersion\":\"",
        "resourceVersion=",
        "Resource Version:",
    ]
    .iter()
    .fold(oldest_held(&joined), |text, marker| {
        mask_after(&text, marker)
    })
}

/// kube-apiserver's 410 names the version asked for and the oldest it
/// holds, `too old resource version: 1 (522)`: the second is the serving
/// cluster's own.
fn oldest_held(text: &str) -> String {
    const MARKER: &str = "too old resource version: ";
    each_after(text, MARKER, |tail, out| {
        let (asked, rest) = tail.split_at(digits(tail));
        out.push_str(asked);
        match rest.strip_prefix(" (") {
            Some(held) => {
                out.push_str(" (");
                masked(held, out)
            }
            None => rest,
        }
    })
}

/// `text` with the version after each `marker` (and its spaces) masked.
fn mask_after(text: &str, marker: &str) -> String {
    each_after(text, marker, |tail, out| {
        let spaces = tail.len() - tail.trim_start_matches(' ').len();
        out.push_str(&tail[..spaces]);
        masked(&tail[spaces..], out)
    })
}

/// `text`, with what follows each `marker` written by `after` (given the
/// text after the marker, it writes what replaces its start and returns
/// the rest).
fn each_after(
    text: &str,
    marker: &str,
    after: impl for<'t> Fn(&'t str, &mut String) -> &'t str,
) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find(marker) {
        out.push_str(&rest[..i + marker.len()]);
        rest = after(&rest[i + marker.len()..], &mut out);
    }
    out.push_str(rest);
    out
}

/// The number of leading ASCII digits of `text`.
fn digits(text: &str) -> usize {
    text.find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len())
}

/// Writes `<rv>` for the version `text` starts with, if any: digits, or
/// the router's merged version (digits joined by `.`); the rest.
fn masked<'t>(text: &'t str, out: &mut String) -> &'t str {
    let mut end = digits(text);
    if end == 0 {
        return text;
    }
    while let Some(part) = text[end..].strip_prefix('.').map(digits).filter(|n| *n > 0) {
        end += 1 + part;
    }
    out.push_str("<rv>");
    &text[end..]
}

fn is_uid(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() == 5
        && [8, 4, 4, 4, 12]
            .iter()
            .zip(&parts)
            .all(|(n, p)| p.len() == *n && p.chars().all(|c| c.is_ascii_hexdigit()))
}

fn is_time(s: &str) -> bool {
    s.len() >= 20
        && s.as_bytes().get(4) == Some(&b'-')
        && s.as_bytes().get(10) == Some(&b'T')
        && s.ends_with('Z')
}

fn is_age(s: &str) -> bool {
    // 5s, 3m, 2m10s, 4h, 1d, <unknown> is kept.
    let mut saw_unit = false;
    let mut digits = false;
    for c in s.chars() {
        match c {
            '0'..='9' => digits = true,
            's' | 'm' | 'h' | 'd' if digits => {
                saw_unit = true;
                digits = false;
            }
            _ => return false,
        }
    }
    saw_unit && !digits
}

/// A name made from `metadata.generateName` keeps its prefix only.
fn generated_name(value: &mut Value) {
    let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let Some(prefix) = metadata
        .get("generateName")
        .and_then(Value::as_str)
        .map(str::to_string)
    else {
        return;
    };
    if let Some(Value::String(name)) = metadata.get_mut("name")
        && name.starts_with(&prefix)
    {
        *name = format!("{prefix}<generated>");
    }
}
