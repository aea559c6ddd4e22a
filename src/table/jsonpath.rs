//! The JSONPath of a CRD's printer columns, read and evaluated as
//! kube-apiserver's table convertor does (client-go's `util/jsonpath`, with
//! missing keys allowed, first result taken), for the forms columns use:
//! fields (`.a.b`, `['a.b']`), indices (`[0]`, `[-1]`), `[*]` over arrays,
//! and filters comparing one value with a literal
//! (`[?(@.type=="Ready")]`). Anything else is [`Unsupported`]: the caller
//! then asks kube-apiserver for the Table instead of guessing. Pure.

use serde_json::Value;

/// A path or a value this reader does not evaluate exactly as Go does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unsupported;

/// One step of a path.
#[derive(Clone, Debug, PartialEq)]
enum Step {
    Field(String),
    /// Several steps written as one (`['a.b']`).
    Path(Vec<Step>),
    Index(i64),
    All,
    Filter {
        path: Vec<Step>,
        equal: bool,
        literal: Literal,
    },
}

/// A filter's right-hand side.
#[derive(Clone, Debug, PartialEq)]
enum Literal {
    Text(String),
    Int(i64),
    Bool(bool),
}

/// A compiled column path.
#[derive(Clone, Debug, PartialEq)]
pub struct Path {
    steps: Vec<Step>,
}

/// What a path finds in one object: the value (JSON `null` included), or
/// nothing (kube-apiserver's cell is then `null`).
pub type Found<'a> = Option<&'a Value>;

impl Path {
    /// Reads a column's `jsonPath` (`.spec.replicas`).
    pub fn parse(text: &str) -> Result<Path, Unsupported> {
        let steps = parse_steps(text)?;
        if steps.is_empty() {
            return Err(Unsupported);
        }
        Ok(Path { steps })
    }

    /// The object fields the path goes through before its first step that
    /// is not a plain field: everything it can find lies below them.
    pub fn leading_fields(&self) -> Vec<String> {
        let mut fields = Vec::new();
        leading(&self.steps, &mut fields);
        fields
    }

    /// The first value the path finds in `object`, as the table convertor
    /// takes it; `Ok(None)` when it finds none or Go's evaluation fails
    /// (both give a `null` cell).
    pub fn first<'a>(&self, object: &'a Value) -> Result<Found<'a>, Unsupported> {
        match evaluate(&self.steps, vec![object])? {
            Ok(found) => Ok(found.into_iter().next()),
            Err(Failed) => Ok(None),
        }
    }
}

/// Adds `steps`' leading plain fields to `fields`; whether every step was
/// one.
fn leading(steps: &[Step], fields: &mut Vec<String>) -> bool {
    for step in steps {
        let plain = match step {
            Step::Field(name) => {
                fields.push(name.clone());
                true
            }
            Step::Path(inner) => leading(inner, fields),
            _ => false,
        };
        if !plain {
            return false;
        }
    }
    true
}

/// Go's evaluation returned an error (the cell is `null`).
struct Failed;

fn parse_steps(text: &str) -> Result<Vec<Step>, Unsupported> {
    let mut steps = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after
                .find(|c: char| is_terminator(c) || c == '\\')
                .unwrap_or(after.len());
            if after[end..].starts_with('\\') {
                return Err(Unsupported);
            }
            let field = &after[..end];
            if field.is_empty() || field == "*" {
                return Err(Unsupported); // `..` recursion, `.*` wildcard
            }
            steps.push(Step::Field(field.to_string()));
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix("[?(") {
            let end = after.find(")]").ok_or(Unsupported)?;
            steps.push(parse_filter(&after[..end])?);
            rest = &after[end + 2..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']').ok_or(Unsupported)?;
            let inside = &after[..end];
            steps.push(parse_bracket(inside)?);
            rest = &after[end + 1..];
        } else {
            return Err(Unsupported);
        }
    }
    Ok(steps)
}

/// What ends a field name in client-go's parser.
fn is_terminator(c: char) -> bool {
    matches!(
        c,
        ' ' | '\t' | '\r' | '\n' | '.' | ',' | '[' | ']' | '$' | '@' | '{' | '}'
    )
}

fn parse_bracket(inside: &str) -> Result<Step, Unsupported> {
    if inside == "*" {
        return Ok(Step::All);
    }
    if let Some(key) = inside
        .strip_prefix('\'')
        .and_then(|k| k.strip_suffix('\''))
        .filter(|k| !k.contains('\''))
    {
        // client-go reads `['a.b']` as the path `.a.b`, not as one key.
        let mut steps = parse_steps(&format!(".{key}"))?;
        return Ok(match steps.len() {
            1 => steps.remove(0),
            _ => Step::Path(steps),
        });
    }
    let digits = inside.strip_prefix('-').unwrap_or(inside);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Unsupported); // slices, unions, anything else
    }
    inside.parse().map(Step::Index).map_err(|_| Unsupported)
}

/// `@.a.b == 'x'` (or `!=`), with a string, integer or boolean literal.
fn parse_filter(inside: &str) -> Result<Step, Unsupported> {
    let (left, right, equal) = if let Some((l, r)) = inside.split_once("==") {
        (l, r, true)
    } else if let Some((l, r)) = inside.split_once("!=") {
        (l, r, false)
    } else {
        return Err(Unsupported);
    };
    let left = left.trim();
    let right = right.trim();
    let path = left.strip_prefix('@').ok_or(Unsupported)?;
    let path = parse_steps(path)?;
    if path.is_empty()
        || path
            .iter()
            .any(|s| !matches!(s, Step::Field(_) | Step::Index(_)))
    {
        return Err(Unsupported);
    }
    let literal = if let Some(text) = quoted(right) {
        Literal::Text(text.to_string())
    } else if right == "true" || right == "false" {
        Literal::Bool(right == "true")
    } else if !right.is_empty()
        && right
            .strip_prefix('-')
            .unwrap_or(right)
            .bytes()
            .all(|b| b.is_ascii_digit())
    {
        Literal::Int(right.parse().map_err(|_| Unsupported)?)
    } else {
        return Err(Unsupported);
    };
    Ok(Step::Filter {
        path,
        equal,
        literal,
    })
}

/// The text of a quoted literal without escapes.
fn quoted(text: &str) -> Option<&str> {
    ['"', '\''].iter().find_map(|q| {
        text.strip_prefix(*q)
            .and_then(|t| t.strip_suffix(*q))
            .filter(|t| !t.contains(*q) && !t.contains('\\'))
    })
}

fn evaluate<'a>(
    steps: &[Step],
    mut values: Vec<&'a Value>,
) -> Result<Result<Vec<&'a Value>, Failed>, Unsupported> {
    for step in steps {
        let mut next = Vec::new();
        match step {
            Step::Path(inner) => match evaluate(inner, values)? {
                Ok(found) => next = found,
                Err(Failed) => return Ok(Err(Failed)),
            },
            Step::Field(name) => {
                for value in values {
                    // Null is skipped (`template.Indirect`); a field of
                    // anything but an object finds nothing.
                    if let Value::Object(map) = value
                        && let Some(found) = map.get(name)
                    {
                        next.push(found);
                    }
                }
            }
            Step::Index(index) => {
                for value in values {
                    match value {
                        Value::Null => {}
                        Value::Array(items) => {
                            let len = items.len() as i64;
                            let at = if *index < 0 { index + len } else { *index };
                            match usize::try_from(at).ok().and_then(|i| items.get(i)) {
                                Some(item) => next.push(item),
                                None => return Ok(Err(Failed)),
                            }
                        }
                        _ => return Ok(Err(Failed)),
                    }
                }
            }
            Step::All => {
                for value in values {
                    match value {
                        Value::Array(items) => next.extend(items.iter()),
                        // Go walks a map in random order, and a string by
                        // its bytes: not told exactly.
                        Value::Object(map) if !map.is_empty() => return Err(Unsupported),
                        Value::String(text) if !text.is_empty() => return Err(Unsupported),
                        _ => {}
                    }
                }
            }
            Step::Filter {
                path,
                equal,
                literal,
            } => match filter(path, *equal, literal, values)? {
                Ok(kept) => next = kept,
                Err(Failed) => return Ok(Err(Failed)),
            },
        }
        values = next;
    }
    Ok(Ok(values))
}

/// The items of the arrays `values` whose `path` is (`equal`) or is not
/// `literal`, as `[?(@.path == literal)]` keeps them.
fn filter<'a>(
    path: &[Step],
    equal: bool,
    literal: &Literal,
    values: Vec<&'a Value>,
) -> Result<Result<Vec<&'a Value>, Failed>, Unsupported> {
    let mut kept = Vec::new();
    for value in values {
        let Value::Array(items) = value else {
            return Ok(Err(Failed));
        };
        for item in items {
            let lefts = match evaluate(path, vec![item])? {
                Ok(lefts) => lefts,
                Err(Failed) => return Ok(Err(Failed)),
            };
            let left = match lefts.as_slice() {
                [] => continue,
                [left] => *left,
                _ => return Ok(Err(Failed)),
            };
            let Some(same) = compare(left, literal) else {
                return Ok(Err(Failed));
            };
            if same == equal {
                kept.push(item);
            }
        }
    }
    Ok(Ok(kept))
}

/// Whether `left` equals `literal`, as text/template's `eq` decides; `None`
/// when Go refuses to compare them (different kinds).
fn compare(left: &Value, literal: &Literal) -> Option<bool> {
    match (left, literal) {
        (Value::String(a), Literal::Text(b)) => Some(a == b),
        (Value::Bool(a), Literal::Bool(b)) => Some(a == b),
        (Value::Number(n), Literal::Int(b)) => n.as_i64().map(|a| a == *b),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn first(path: &str, object: &Value) -> Result<Option<Value>, Unsupported> {
        Path::parse(path)?.first(object).map(|v| v.cloned())
    }

    #[test]
    fn fields_indices_and_filters_find_what_go_finds() {
        let object = json!({
            "spec": {"size": "small", "replicas": 3, "nothing": null,
                "dotted.key": "d", "list": [1, 2, 3]},
            "status": {"conditions": [
                {"type": "Synced", "status": "True"},
                {"type": "Ready", "status": "False", "count": 2},
            ]},
        });
        assert_eq!(first(".spec.size", &object), Ok(Some(json!("small"))));
        assert_eq!(first(".spec.replicas", &object), Ok(Some(json!(3))));
        assert_eq!(first(".spec.nothing", &object), Ok(Some(Value::Null)));
        assert_eq!(first(".spec.nothing.deeper", &object), Ok(None));
        assert_eq!(first(".spec.missing", &object), Ok(None));
        assert_eq!(first(".spec.size.deeper", &object), Ok(None));
        // client-go reads a quoted key as a path: `.spec.dotted.key`.
        assert_eq!(first(".spec['dotted.key']", &object), Ok(None));
        assert_eq!(first("['spec'].size", &object), Ok(Some(json!("small"))));
        assert_eq!(first(".spec.list[0]", &object), Ok(Some(json!(1))));
        assert_eq!(first(".spec.list[-1]", &object), Ok(Some(json!(3))));
        assert_eq!(first(".spec.list[3]", &object), Ok(None), "out of bounds");
        assert_eq!(first(".spec.size[0]", &object), Ok(None), "not an array");
        assert_eq!(first(".spec.list[*]", &object), Ok(Some(json!(1))));
        assert_eq!(
            first(r#".status.conditions[?(@.type=="Ready")].status"#, &object),
            Ok(Some(json!("False")))
        );
        assert_eq!(
            first(".status.conditions[?(@.type != 'Ready')].status", &object),
            Ok(Some(json!("True")))
        );
        assert_eq!(
            first(".status.conditions[?(@.count==2)].type", &object),
            Ok(Some(json!("Ready")))
        );
        assert_eq!(
            first(r#".status.conditions[?(@.type=="Gone")].status"#, &object),
            Ok(None)
        );
        // Comparing a string with a number is an error in Go: no cell.
        assert_eq!(
            first(".status.conditions[?(@.type==2)].status", &object),
            Ok(None)
        );
        assert_eq!(
            first(".spec[?(@.a=='b')]", &object),
            Ok(None),
            "not an array"
        );
    }

    #[test]
    fn a_path_reads_below_its_leading_fields() {
        let leading = |path: &str| Path::parse(path).unwrap().leading_fields();
        assert_eq!(leading(".spec.plan"), ["spec", "plan"]);
        assert_eq!(leading("['spec'].plan"), ["spec", "plan"]);
        assert_eq!(leading(".spec['a.b'].c"), ["spec", "a", "b", "c"]);
        assert_eq!(
            leading(".status.conditions[0].type"),
            ["status", "conditions"]
        );
        assert_eq!(
            leading(r#".status.conditions[?(@.type=="Ready")].status"#),
            ["status", "conditions"]
        );
        assert_eq!(leading(".items[*].name"), ["items"]);
    }

    #[test]
    fn what_go_would_tell_otherwise_is_unsupported() {
        let object = json!({"spec": {"map": {"a": 1, "b": 2}, "text": "ab"}});
        for path in [
            "",
            ".",
            "..spec",
            ".spec..a",
            ".spec.*",
            ".spec.map[*]",
            ".spec.text[*]",
            ".spec.list[0:2]",
            ".spec.list[0,1]",
            r".spec.a\.b",
            "spec",
            ".spec[?(@.a>1)]",
            ".spec[?(@.a=='x' && @.b=='y')]",
            "{.spec}",
            ".spec['a",
        ] {
            let result = Path::parse(path).and_then(|p| p.first(&object).map(|_| ()));
            assert_eq!(result, Err(Unsupported), "{path:?}");
        }
    }
}
