//! JSON request bodies read as kube-apiserver reads them, so that bindery
//! forwards what it decoded and never a byte it could not read:
//!
//! - syntax is checked by a port of Go's `encoding/json` scanner, so a body
//!   kube-apiserver refuses is refused with the same words
//!   (`invalid character 'b' looking for beginning of object key string`),
//!   and one it accepts is accepted, up to its nesting limit of 10000;
//! - strings are decoded as Go decodes them: invalid UTF-8 and lone UTF-16
//!   surrogates (`"\ud800"`) become U+FFFD, byte by byte, where a stricter
//!   parser would refuse the body and tempt a proxy to pass it on as sent;
//! - integers that fit an int64 stay integers, other numbers become float64
//!   (`sigs.k8s.io/json`'s `PreserveInts`), and a float that overflows is
//!   refused as Go refuses it;
//! - a key given twice keeps its last value, and is reported with
//!   kube-apiserver's path for it (`spec.items[0].name`), for the
//!   `duplicate field` warnings and strict errors it gives.
//!
//! Decoding is iterative, so depth costs heap, not stack. Pure.

use serde_json::{Map, Number, Value};

/// Go's `maxNestingDepth`, the depth [`crate::deep`] bounds objects by.
pub const MAX_DEPTH: usize = crate::deep::OBJECT_DEPTH;

/// A body Go's `encoding/json` would not read, with its message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum JsonError {
    /// A syntax error, worded as Go's `SyntaxError`.
    #[error("{0}")]
    Syntax(String),
    /// A number no float64 holds.
    #[error("json: cannot unmarshal number {0} into Go value of type float64")]
    Number(String),
}

/// A decoded body.
#[derive(Clone, Debug, PartialEq)]
pub struct Decoded {
    pub value: Value,
    /// The paths of keys given more than once, as kube-apiserver names
    /// them, each once, at most 100 (its limit).
    pub duplicate_fields: Vec<String>,
}

/// Decodes `data` as kube-apiserver would.
pub fn decode(data: &[u8]) -> Result<Decoded, JsonError> {
    match decode_partial(data)? {
        (decoded, None) => Ok(decoded),
        (_, Some(number)) => Err(JsonError::Number(number)),
    }
}

/// Like [`decode`], but a number no float64 holds becomes null and is
/// returned beside the value (Go reads the rest of the body before it
/// fails on it, the version and kind among it).
pub fn decode_partial(data: &[u8]) -> Result<(Decoded, Option<String>), JsonError> {
    check_valid(data)?;
    Ok(Builder::new(data).build())
}

/// Go's `checkValid`: the first syntax error in `data`, if any.
pub fn check_valid(data: &[u8]) -> Result<(), JsonError> {
    let mut scanner = Scanner::default();
    for &c in data {
        scanner.step(c)?;
    }
    scanner.eof()
}

// ---- the scanner: Go's state machine, state for state ----

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Parse {
    ObjectKey,
    ObjectValue,
    ArrayValue,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
enum State {
    #[default]
    BeginValue,
    BeginValueOrEmpty,
    BeginStringOrEmpty,
    BeginString,
    EndValue,
    EndTop,
    InString,
    InStringEsc,
    /// Inside `\u`, with this many hex digits read.
    InStringEscU(u8),
    Neg,
    One,
    Zero,
    Dot,
    Dot0,
    E,
    ESign,
    E0,
    /// A literal (`true`, `false`, `null`) with what it still expects.
    Literal(&'static [u8], &'static str),
}

#[derive(Default)]
struct Scanner {
    state: State,
    parse: Vec<Parse>,
    end_top: bool,
}

type Step = Result<(), JsonError>;

impl Scanner {
    fn error(c: u8, context: &str) -> JsonError {
        JsonError::Syntax(format!("invalid character {} {context}", quote_char(c)))
    }

    fn push(&mut self, c: u8, parse: Parse) -> Step {
        self.parse.push(parse);
        if self.parse.len() <= MAX_DEPTH {
            Ok(())
        } else {
            Err(Self::error(c, "exceeded max depth"))
        }
    }

    fn step(&mut self, c: u8) -> Step {
        match self.state {
            State::BeginValueOrEmpty => {
                if is_space(c) {
                    return Ok(());
                }
                if c == b']' {
                    return self.end_value(c);
                }
                self.begin_value(c)
            }
            State::BeginValue => self.begin_value(c),
            State::BeginStringOrEmpty => {
                if is_space(c) {
                    return Ok(());
                }
                if c == b'}' {
                    if let Some(last) = self.parse.last_mut() {
                        *last = Parse::ObjectValue;
                    }
                    return self.end_value(c);
                }
                self.begin_string(c)
            }
            State::BeginString => self.begin_string(c),
            State::EndValue => self.end_value(c),
            State::EndTop => self.end_top(c),
            State::InString | State::InStringEsc | State::InStringEscU(_) => self.in_string(c),
            State::Neg
            | State::One
            | State::Zero
            | State::Dot
            | State::Dot0
            | State::E
            | State::ESign
            | State::E0 => self.in_number(c),
            State::Literal(rest, literal) => {
                if c != rest[0] {
                    let expecting =
                        format!("in literal {literal} (expecting {})", quote_char(rest[0]));
                    return Err(Self::error(c, &expecting));
                }
                self.state = if rest.len() == 1 {
                    State::EndValue
                } else {
                    State::Literal(&rest[1..], literal)
                };
                Ok(())
            }
        }
    }
    /// [`Self::step`] inside a string literal.
    fn in_string(&mut self, c: u8) -> Step {
        match self.state {
            State::InString => {
                match c {
                    b'"' => self.state = State::EndValue,
                    b'\\' => self.state = State::InStringEsc,
                    c if c < 0x20 => return Err(Self::error(c, "in string literal")),
                    _ => {}
                }
                Ok(())
            }
            State::InStringEsc => {
                self.state = match c {
                    b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => State::InString,
                    b'u' => State::InStringEscU(0),
                    _ => return Err(Self::error(c, "in string escape code")),
                };
                Ok(())
            }
            State::InStringEscU(read) => {
                if !c.is_ascii_hexdigit() {
                    return Err(Self::error(c, "in \\u hexadecimal character escape"));
                }
                self.state = if read == 3 {
                    State::InString
                } else {
                    State::InStringEscU(read + 1)
                };
                Ok(())
            }
            // Not reached: `step` calls this in a string's states only.
            _ => Err(Self::error(c, "in string literal")),
        }
    }

    /// [`Self::step`] inside a number literal.
    fn in_number(&mut self, c: u8) -> Step {
        match self.state {
            State::Neg => {
                self.state = match c {
                    b'0' => State::Zero,
                    b'1'..=b'9' => State::One,
                    _ => return Err(Self::error(c, "in numeric literal")),
                };
                Ok(())
            }
            State::One => {
                if c.is_ascii_digit() {
                    return Ok(());
                }
                self.zero(c)
            }
            State::Zero => self.zero(c),
            State::Dot => {
                if c.is_ascii_digit() {
                    self.state = State::Dot0;
                    return Ok(());
                }
                Err(Self::error(c, "after decimal point in numeric literal"))
            }
            State::Dot0 => {
                if c.is_ascii_digit() {
                    return Ok(());
                }
                if c == b'e' || c == b'E' {
                    self.state = State::E;
                    return Ok(());
                }
                self.end_value(c)
            }
            State::E => {
                if c == b'+' || c == b'-' {
                    self.state = State::ESign;
                    return Ok(());
                }
                self.e_sign(c)
            }
            State::ESign => self.e_sign(c),
            State::E0 => {
                if c.is_ascii_digit() {
                    return Ok(());
                }
                self.end_value(c)
            }
            // Not reached: `step` calls this in a number's states only.
            _ => Err(Self::error(c, "in numeric literal")),
        }
    }

    fn begin_value(&mut self, c: u8) -> Step {
        if is_space(c) {
            return Ok(());
        }
        self.state = match c {
            b'{' => {
                self.state = State::BeginStringOrEmpty;
                return self.push(c, Parse::ObjectKey);
            }
            b'[' => {
                self.state = State::BeginValueOrEmpty;
                return self.push(c, Parse::ArrayValue);
            }
            b'"' => State::InString,
            b'-' => State::Neg,
            b'0' => State::Zero,
            b't' => State::Literal(b"rue", "true"),
            b'f' => State::Literal(b"alse", "false"),
            b'n' => State::Literal(b"ull", "null"),
            b'1'..=b'9' => State::One,
            _ => return Err(Self::error(c, "looking for beginning of value")),
        };
        Ok(())
    }

    fn begin_string(&mut self, c: u8) -> Step {
        if is_space(c) {
            return Ok(());
        }
        if c == b'"' {
            self.state = State::InString;
            return Ok(());
        }
        Err(Self::error(c, "looking for beginning of object key string"))
    }

    fn zero(&mut self, c: u8) -> Step {
        match c {
            b'.' => self.state = State::Dot,
            b'e' | b'E' => self.state = State::E,
            _ => return self.end_value(c),
        }
        Ok(())
    }

    fn e_sign(&mut self, c: u8) -> Step {
        if c.is_ascii_digit() {
            self.state = State::E0;
            return Ok(());
        }
        Err(Self::error(c, "in exponent of numeric literal"))
    }

    fn end_value(&mut self, c: u8) -> Step {
        let Some(&parse) = self.parse.last() else {
            self.state = State::EndTop;
            self.end_top = true;
            return self.end_top(c);
        };
        if is_space(c) {
            self.state = State::EndValue;
            return Ok(());
        }
        match (parse, c) {
            (Parse::ObjectKey, b':') => {
                *self.parse.last_mut().expect("checked") = Parse::ObjectValue;
                self.state = State::BeginValue;
            }
            (Parse::ObjectKey, _) => return Err(Self::error(c, "after object key")),
            (Parse::ObjectValue, b',') => {
                *self.parse.last_mut().expect("checked") = Parse::ObjectKey;
                self.state = State::BeginString;
            }
            (Parse::ObjectValue, b'}') | (Parse::ArrayValue, b']') => {
                self.parse.pop();
                self.state = State::EndValue;
            }
            (Parse::ObjectValue, _) => {
                return Err(Self::error(c, "after object key:value pair"));
            }
            (Parse::ArrayValue, b',') => self.state = State::BeginValue,
            (Parse::ArrayValue, _) => return Err(Self::error(c, "after array element")),
        }
        Ok(())
    }

    fn end_top(&mut self, c: u8) -> Step {
        if !is_space(c) {
            return Err(Self::error(c, "after top-level value"));
        }
        Ok(())
    }

    fn eof(&mut self) -> Step {
        if self.end_top {
            return Ok(());
        }
        // Go feeds a space: it ends a number at the top level, and is the
        // invalid character of an unfinished literal.
        self.step(b' ')?;
        if self.end_top {
            return Ok(());
        }
        Err(JsonError::Syntax("unexpected end of JSON input".into()))
    }
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

/// Go's `quoteChar`: a byte quoted for a syntax error, as
/// `strconv.Quote(string(rune(c)))` between single quotes.
fn quote_char(c: u8) -> String {
    match c {
        b'\'' => r"'\''".into(),
        b'"' => r#"'"'"#.into(),
        b'\\' => r"'\\'".into(),
        0x07 => r"'\a'".into(),
        0x08 => r"'\b'".into(),
        0x09 => r"'\t'".into(),
        0x0a => r"'\n'".into(),
        0x0b => r"'\v'".into(),
        0x0c => r"'\f'".into(),
        0x0d => r"'\r'".into(),
        0x00..=0x1f | 0x7f => format!("'\\x{c:02x}'"),
        // Latin-1 controls, the no-break space and the soft hyphen are not
        // printable to Go.
        0x80..=0xa0 | 0xad => format!("'\\u{:04x}'", u32::from(c)),
        _ => format!("'{}'", char::from(c)),
    }
}

// ---- the builder: values from input the scanner accepted ----

enum Frame {
    Object(Map<String, Value>),
    Array(Vec<Value>),
}

enum Segment {
    Key(String),
    Index(usize),
}

struct Builder<'a> {
    data: &'a [u8],
    at: usize,
    /// Where each open value sits: an object member's key or an array index.
    path: Vec<Segment>,
    duplicates: Vec<String>,
    /// The first number literal no float64 holds.
    overflow: Option<String>,
}

impl<'a> Builder<'a> {
    fn new(data: &'a [u8]) -> Self {
        Self {
            data,
            at: 0,
            path: Vec::new(),
            duplicates: Vec::new(),
            overflow: None,
        }
    }

    fn skip_space(&mut self) {
        while self.at < self.data.len() && is_space(self.data[self.at]) {
            self.at += 1;
        }
    }

    fn next(&mut self) -> u8 {
        self.skip_space();
        let c = self.data[self.at];
        self.at += 1;
        c
    }

    fn peek(&mut self) -> u8 {
        self.skip_space();
        self.data[self.at]
    }

    /// Builds the value. The input is valid, so every index is in bounds.
    fn build(mut self) -> (Decoded, Option<String>) {
        let mut stack: Vec<Frame> = Vec::new();
        // Each object frame's pending key, in step with `stack`.
        let mut keys: Vec<Option<String>> = Vec::new();
        let mut finished: Option<Value> = None;
        loop {
            // Read the next value's start, or close containers.
            let value = match self.next() {
                b'{' => {
                    if self.peek() == b'}' {
                        self.at += 1;
                        Value::Object(Map::new())
                    } else {
                        stack.push(Frame::Object(Map::new()));
                        let key = self.key(stack.last());
                        keys.push(Some(key));
                        continue;
                    }
                }
                b'[' => {
                    if self.peek() == b']' {
                        self.at += 1;
                        Value::Array(Vec::new())
                    } else {
                        stack.push(Frame::Array(Vec::new()));
                        keys.push(None);
                        self.path.push(Segment::Index(0));
                        continue;
                    }
                }
                first => self.scalar(first),
            };
            // Place it, closing every container it completes.
            let mut value = value;
            loop {
                let Some(frame) = stack.last_mut() else {
                    finished = Some(value);
                    break;
                };
                match frame {
                    Frame::Object(map) => {
                        self.path.pop();
                        let key = keys
                            .last_mut()
                            .and_then(Option::take)
                            .expect("an object member has a key");
                        map.insert(key, value);
                        if self.next() == b',' {
                            let key = self.key(stack.last());
                            *keys.last_mut().expect("in step") = Some(key);
                            break;
                        }
                    }
                    Frame::Array(items) => {
                        items.push(value);
                        if self.next() == b',' {
                            if let Some(Segment::Index(i)) = self.path.last_mut() {
                                *i += 1;
                            }
                            break;
                        }
                        self.path.pop();
                    }
                }
                keys.pop();
                value = match stack.pop().expect("a frame was open") {
                    Frame::Object(map) => Value::Object(map),
                    Frame::Array(items) => Value::Array(items),
                };
            }
            if let Some(value) = finished.take() {
                let decoded = Decoded {
                    value,
                    duplicate_fields: self.duplicates,
                };
                return (decoded, self.overflow);
            }
        }
    }

    /// A string, `true`, `false`, `null` or number, whose first byte
    /// (`first`) has been read.
    fn scalar(&mut self, first: u8) -> Value {
        match first {
            b'"' => Value::String(self.string()),
            b't' => {
                self.at += 3;
                Value::Bool(true)
            }
            b'f' => {
                self.at += 4;
                Value::Bool(false)
            }
            b'n' => {
                self.at += 3;
                Value::Null
            }
            _ => {
                self.at -= 1;
                self.number()
            }
        }
    }

    /// Reads an object member's key and its colon, noting a duplicate.
    fn key(&mut self, frame: Option<&Frame>) -> String {
        self.next(); // the opening quote
        let key = self.string();
        self.next(); // the colon
        if let Some(Frame::Object(map)) = frame
            && map.contains_key(&key)
            && self.duplicates.len() < 100
        {
            let path = self.path_to(&key);
            if !self.duplicates.contains(&path) {
                self.duplicates.push(path);
            }
        }
        self.path.push(Segment::Key(key.clone()));
        key
    }

    /// kube-apiserver's name for a member `key` of the open value.
    fn path_to(&self, key: &str) -> String {
        let mut out = String::new();
        for segment in &self.path {
            match segment {
                Segment::Key(k) if out.is_empty() => out.push_str(k),
                Segment::Key(k) => {
                    out.push('.');
                    out.push_str(k);
                }
                Segment::Index(i) => out.push_str(&format!("[{i}]")),
            }
        }
        if out.is_empty() {
            key.to_string()
        } else {
            format!("{out}.{key}")
        }
    }

    /// A string's contents after its opening quote, as Go unquotes them.
    fn string(&mut self) -> String {
        let mut out = String::new();
        loop {
            let c = self.data[self.at];
            match c {
                b'"' => {
                    self.at += 1;
                    return out;
                }
                b'\\' => {
                    let escape = self.data[self.at + 1];
                    self.at += 2;
                    match escape {
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let unit = self.hex4(self.at);
                            self.at += 4;
                            out.push(self.utf16(unit));
                        }
                        other => out.push(char::from(other)),
                    }
                }
                _ => match decode_rune(&self.data[self.at..]) {
                    Some((rune, width)) => {
                        out.push(rune);
                        self.at += width;
                    }
                    None => {
                        out.push(char::REPLACEMENT_CHARACTER);
                        self.at += 1;
                    }
                },
            }
        }
    }

    fn hex4(&self, at: usize) -> u32 {
        let text = std::str::from_utf8(&self.data[at..at + 4]).expect("hex digits are ASCII");
        u32::from_str_radix(text, 16).expect("the scanner checked the digits")
    }

    /// One `\u` escape's character: a surrogate pair when the next escape
    /// completes it, else U+FFFD for a surrogate, as Go decodes.
    fn utf16(&mut self, unit: u32) -> char {
        if !(0xd800..0xe000).contains(&unit) {
            return char::from_u32(unit).expect("not a surrogate");
        }
        let next_is_escape = self.data.get(self.at..self.at + 2) == Some(b"\\u")
            && self.data.len() >= self.at + 6
            && self.data[self.at + 2..self.at + 6]
                .iter()
                .all(u8::is_ascii_hexdigit);
        if (0xd800..0xdc00).contains(&unit) && next_is_escape {
            let low = self.hex4(self.at + 2);
            if (0xdc00..0xe000).contains(&low) {
                self.at += 6;
                let rune = 0x10000 + ((unit - 0xd800) << 10) + (low - 0xdc00);
                return char::from_u32(rune).expect("a valid pair");
            }
        }
        char::REPLACEMENT_CHARACTER
    }

    /// A number literal: an int64 when it is one, else a float64 (null,
    /// noted, when no float64 holds it).
    fn number(&mut self) -> Value {
        let start = self.at;
        while self.at < self.data.len()
            && matches!(
                self.data[self.at],
                b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'
            )
        {
            self.at += 1;
        }
        let text = std::str::from_utf8(&self.data[start..self.at]).expect("ASCII");
        if let Ok(int) = text.parse::<i64>() {
            return Value::Number(Number::from(int));
        }
        let float: f64 = text.parse().expect("the scanner checked the syntax");
        match Number::from_f64(float) {
            Some(number) => Value::Number(number),
            None => {
                self.overflow.get_or_insert_with(|| text.to_string());
                Value::Null
            }
        }
    }
}

/// The first UTF-8 character of `bytes` and its width, as Go's
/// `utf8.DecodeRune` reads it; `None` where Go reads `RuneError` of width 1.
fn decode_rune(bytes: &[u8]) -> Option<(char, usize)> {
    let width = match bytes.first()? {
        0x00..=0x7f => 1,
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => return None,
    };
    let text = std::str::from_utf8(bytes.get(..width)?).ok()?;
    text.chars().next().map(|c| (c, width))
}

/// JSON as Go's `json.Marshal` writes a map: compact, keys sorted, and
/// `<`, `>`, `&`, U+2028 and U+2029 escaped. `FieldsV1` holds these bytes, and
/// kube-apiserver quotes them in some errors.
pub fn go_marshal(value: &Value) -> Vec<u8> {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sorted(&map[k])))
                        .collect(),
                )
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    let text = serde_json::to_string(&sorted(value)).expect("a JSON value serializes");
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn syntax(body: &str) -> String {
        match decode(body.as_bytes()) {
            Err(JsonError::Syntax(message)) => message,
            other => panic!("{body:?} gave {other:?}"),
        }
    }

    /// Go's own messages for these bodies (`encoding/json`, as
    /// kube-apiserver quotes them after "json parse error: ").
    #[test]
    fn syntax_errors_are_gos() {
        for (body, message) in [
            ("", "unexpected end of JSON input"),
            ("{", "unexpected end of JSON input"),
            (
                "{broken",
                "invalid character 'b' looking for beginning of object key string",
            ),
            ("{\"a\" 1}", "invalid character '1' after object key"),
            (
                "{\"a\":1 \"b\"}",
                "invalid character '\"' after object key:value pair",
            ),
            ("[1 2]", "invalid character '2' after array element"),
            ("{} x", "invalid character 'x' after top-level value"),
            ("\"a\nb\"", "invalid character '\\n' in string literal"),
            ("\"\\q\"", "invalid character 'q' in string escape code"),
            (
                "\"\\u12g4\"",
                "invalid character 'g' in \\u hexadecimal character escape",
            ),
            ("-x", "invalid character 'x' in numeric literal"),
            (
                "1.x",
                "invalid character 'x' after decimal point in numeric literal",
            ),
            (
                "1ex",
                "invalid character 'x' in exponent of numeric literal",
            ),
            (
                "tru",
                "invalid character ' ' in literal true (expecting 'e')",
            ),
            (
                "1.",
                "invalid character ' ' after decimal point in numeric literal",
            ),
            ("-", "invalid character ' ' in numeric literal"),
            ("\"abc", "unexpected end of JSON input"),
            ("{\"a\":", "unexpected end of JSON input"),
            (
                "\u{7f}",
                "invalid character '\\x7f' looking for beginning of value",
            ),
            (
                "trux",
                "invalid character 'x' in literal true (expecting 'e')",
            ),
            (
                "fx",
                "invalid character 'x' in literal false (expecting 'a')",
            ),
            (
                "nul!",
                "invalid character '!' in literal null (expecting 'l')",
            ),
            (
                "'a'",
                "invalid character '\\'' looking for beginning of value",
            ),
            (
                "\u{1}",
                "invalid character '\\x01' looking for beginning of value",
            ),
            (
                "{\"a\":01}",
                "invalid character '1' after object key:value pair",
            ),
            (
                "[,]",
                "invalid character ',' looking for beginning of value",
            ),
            (
                "[1,]",
                "invalid character ']' looking for beginning of value",
            ),
            (
                "{\"a\":1,}",
                "invalid character '}' looking for beginning of object key string",
            ),
        ] {
            assert_eq!(syntax(body), message, "{body:?}");
        }
        assert_eq!(
            decode(b"\xff").unwrap_err(),
            JsonError::Syntax("invalid character '\u{ff}' looking for beginning of value".into())
        );
        for (byte, quoted) in [
            (0xa0u8, "'\\u00a0'"),
            (0xad, "'\\u00ad'"),
            (0xa1, "'\u{a1}'"),
        ] {
            assert_eq!(
                decode(&[byte]).unwrap_err().to_string(),
                format!("invalid character {quoted} looking for beginning of value")
            );
        }
        assert_eq!(
            decode(b"\x85").unwrap_err(),
            JsonError::Syntax("invalid character '\\u0085' looking for beginning of value".into())
        );
    }

    /// kube-apiserver refused a body nested 10001 deep and took one
    /// nested 10000 deep (checked against a real one).
    #[test]
    fn nesting_is_limited_as_gos() {
        let deep = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
        let decoded = decode(deep(MAX_DEPTH).as_bytes()).unwrap();
        let mut value = &decoded.value;
        for _ in 0..MAX_DEPTH {
            value = &value[0];
        }
        assert_eq!(value, &json!(1));
        assert_eq!(
            syntax(&deep(MAX_DEPTH + 1)),
            "invalid character '[' exceeded max depth"
        );
        let objects = format!(
            "{}1{}",
            "{\"a\":".repeat(MAX_DEPTH + 1),
            "}".repeat(MAX_DEPTH + 1)
        );
        assert_eq!(syntax(&objects), "invalid character '{' exceeded max depth");
    }

    /// What serde_json refuses and Go reads: the case a proxy must not
    /// pass through.
    #[test]
    fn strings_are_coerced_as_go_coerces_them() {
        let value = |body: &[u8]| decode(body).unwrap().value;
        assert_eq!(value(br#""a\ud800b""#), json!("a\u{fffd}b"));
        assert_eq!(value(br#""\udc00""#), json!("\u{fffd}"));
        assert_eq!(value(br#""\ud83d\ude00""#), json!("\u{1f600}"));
        assert_eq!(value(br#""\ud83d\u0041""#), json!("\u{fffd}A"));
        assert_eq!(value(b"\"a\xffb\""), json!("a\u{fffd}b"));
        // A truncated sequence is one U+FFFD per byte, as Go's DecodeRune reads it.
        assert_eq!(value(b"\"\xe2\x82\""), json!("\u{fffd}\u{fffd}"));
        assert_eq!(value(b"\"\xe2\x82\xac\""), json!("\u{20ac}"));
        assert_eq!(
            value(br#""\/\"\\\b\f\n\r\t""#),
            json!("/\"\\\u{8}\u{c}\n\r\t")
        );
        assert_eq!(
            value(b"{\"labels\":{\"bindery.dev/consumer\":\"\\ud800\"}}"),
            json!({"labels": {"bindery.dev/consumer": "\u{fffd}"}})
        );
    }

    #[test]
    fn numbers_are_int64_or_float64() {
        let value = |body: &str| decode(body.as_bytes()).unwrap().value;
        assert_eq!(value("12"), json!(12));
        assert_eq!(value("-0"), json!(0));
        assert_eq!(value("9223372036854775807"), json!(i64::MAX));
        assert_eq!(value("9223372036854775808"), json!(9223372036854775808.0));
        assert_eq!(value("1.5e2"), json!(150.0));
        assert_eq!(value("1e-400"), json!(0.0));
        assert_eq!(
            decode(b"{\"a\":1e400}").unwrap_err().to_string(),
            "json: cannot unmarshal number 1e400 into Go value of type float64"
        );
    }

    #[test]
    fn the_last_of_a_duplicate_key_wins_and_is_reported_by_path() {
        let decoded =
            decode(br#"{"a":1,"spec":{"x":[{"n":1,"n":2}],"y":1,"y":2},"a":3,"a":4}"#).unwrap();
        assert_eq!(
            decoded.value,
            json!({"a": 4, "spec": {"x": [{"n": 2}], "y": 2}})
        );
        assert_eq!(decoded.duplicate_fields, ["spec.x[0].n", "spec.y", "a"]);
        let top = decode(br#"[{"k":1,"k":2}]"#).unwrap();
        assert_eq!(top.duplicate_fields, ["[0].k"]);
    }

    #[test]
    fn values_of_every_shape() {
        let body =
            br#" { "a" : [ 1 , "x" , true , false , null , { } , [ ] , { "b" : [ [ ] ] } ] } "#;
        assert_eq!(
            decode(body).unwrap().value,
            json!({"a": [1, "x", true, false, null, {}, [], {"b": [[]]}]})
        );
        assert_eq!(decode(b"  7 ").unwrap().value, json!(7));
    }

    /// `value` with every negative zero made 0: Go reads the literal `-0`
    /// as the integer 0 (kube-apiserver keeps integers as int64), where
    /// serde_json keeps the float -0.0.
    fn without_negative_zero(value: Value) -> Value {
        match value {
            Value::Number(n) if n.as_f64() == Some(0.0) => json!(0),
            Value::Array(items) => items.into_iter().map(without_negative_zero).collect(),
            Value::Object(map) => Value::Object(
                map.into_iter()
                    .map(|(k, v)| (k, without_negative_zero(v)))
                    .collect(),
            ),
            other => other,
        }
    }

    proptest! {
        /// Anything serde_json reads, this reads to the same value.
        #[test]
        fn agrees_with_serde_json_where_it_reads(body in "[\\[\\]{}\",:0-9a-z.eE+\\- \\\\]{0,40}") {
            if let Ok(expected) = serde_json::from_str::<Value>(&body) {
                let ours = decode(body.as_bytes());
                if let Ok(ours) = &ours {
                    prop_assert_eq!(
                        without_negative_zero(ours.value.clone()),
                        without_negative_zero(expected)
                    );
                } else {
                    // Only floats serde keeps that Go cannot.
                    prop_assert!(matches!(ours, Err(JsonError::Number(_))), "{:?}", ours);
                }
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode(&bytes);
        }

        #[test]
        fn generated_json_round_trips(value in arbitrary_json()) {
            let text = serde_json::to_vec(&value).unwrap();
            prop_assert_eq!(decode(&text).unwrap().value, value);
        }
    }

    fn arbitrary_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            "\\PC{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                proptest::collection::btree_map("[a-z]{1,4}", inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }
}
