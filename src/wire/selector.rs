//! Label and field selectors as kube-apiserver v1.34.10 reads them
//! (`k8s.io/apimachinery` v0.34.10: `labels.Parse` in
//! `pkg/labels/selector.go`, `fields.ParseSelector` in
//! `pkg/fields/selector.go`), with the error kube-apiserver puts in its 400
//! word for word. kube-apiserver parses both while it decodes the
//! `ListOptions` (`metav1.Convert_string_To_labels_Selector` and
//! `Convert_string_To_fields_Selector`, which return the parser's error as
//! it is) and answers `errors.NewBadRequest(err.Error())`: code 400, reason
//! `BadRequest`, no details, before anything else about the request. This
//! module owns that reading, so that bindery refuses a bad selector in the
//! same words and at the same point, forwards what it parsed, written again
//! ([`LabelSelector::encode`], [`FieldSelector::encode`], which
//! kube-apiserver reads back to the same selector), and evaluates selectors
//! with apimachinery's semantics (`matches`). Pure: no I/O.
//!
//! Quirks kept on purpose, because kube-apiserver has them:
//! - the label lexer works on bytes; whitespace is only space, tab, CR and
//!   LF; a NUL byte where a token would begin ends the selector (what
//!   follows is ignored), and one inside a token or operator is skipped;
//! - `in` and `notin` are keywords only where an operator is expected, so
//!   `in in (in)` is a requirement;
//! - `!key` followed by anything but `,` or the end is `!key`, and then
//!   the parser complains about what follows;
//! - a bad label key is reported with the path `<nil>` (the parser
//!   validates keys with no field path), a bad value with
//!   `values[i][key]`, several errors of one requirement as `[a, b]`;
//! - requirements are sorted by key, values sorted and deduplicated, and
//!   `gt`/`lt` (written `>` and `<`) need an integer that is also a valid
//!   label value, so `a>-1` is refused;
//! - field selector terms are sorted as text before they are read, so the
//!   error names the first bad term in that order, not in the caller's;
//!   a term with an empty key and an empty value (`=`, `!=`) is dropped; a
//!   missing field counts as the empty string; keys are not checked at all;
//!   and an unescaped `=` in a value is reported by its code point
//!   (`unescaped character in value: 61`).

use super::go_quote::go_quote;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

// ---- label selectors ----

/// A label requirement's operator (`selection.Operator`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operator {
    /// `key=value`
    Equals,
    /// `key==value`
    DoubleEquals,
    /// `key!=value`
    NotEquals,
    /// `key in (a,b)`
    In,
    /// `key notin (a,b)`
    NotIn,
    /// `key`
    Exists,
    /// `!key`
    DoesNotExist,
    /// `key>5` (`gt`)
    GreaterThan,
    /// `key<5` (`lt`)
    LessThan,
}

impl Operator {
    /// The operator's name in apimachinery (`selection.Operator`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Equals => "=",
            Self::DoubleEquals => "==",
            Self::NotEquals => "!=",
            Self::In => "in",
            Self::NotIn => "notin",
            Self::Exists => "exists",
            Self::DoesNotExist => "!",
            Self::GreaterThan => "gt",
            Self::LessThan => "lt",
        }
    }
}

/// One requirement of a label selector: a valid key, an operator, and its
/// values, sorted and without duplicates (one for `=`, `==`, `!=`, `gt`,
/// `lt`; at least one for `in`, `notin`; none for `exists`, `!`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Requirement {
    key: String,
    operator: Operator,
    values: Vec<String>,
}

impl Requirement {
    pub fn key(&self) -> &str {
        &self.key
    }

    pub fn operator(&self) -> Operator {
        self.operator
    }

    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// `(*Requirement).Matches`, with `get` looking a label up.
    pub fn matches_with<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        let has = |value: &str| self.values.iter().any(|v| v == value);
        match self.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => {
                get(&self.key).is_some_and(has)
            }
            Operator::NotIn | Operator::NotEquals => !get(&self.key).is_some_and(has),
            Operator::Exists => get(&self.key).is_some(),
            Operator::DoesNotExist => get(&self.key).is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let Some(actual) = get(&self.key).and_then(go_parse_int) else {
                    return false;
                };
                let [wanted] = self.values.as_slice() else {
                    return false;
                };
                let Some(wanted) = go_parse_int(wanted) else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    actual > wanted
                } else {
                    actual < wanted
                }
            }
        }
    }
}

/// `(*Requirement).String`: kube-apiserver reads it back to the same
/// requirement.
impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.operator == Operator::DoesNotExist {
            f.write_str("!")?;
        }
        f.write_str(&self.key)?;
        let (operator, parenthesised) = match self.operator {
            Operator::Exists | Operator::DoesNotExist => return Ok(()),
            Operator::Equals => ("=", false),
            Operator::DoubleEquals => ("==", false),
            Operator::NotEquals => ("!=", false),
            Operator::In => (" in (", true),
            Operator::NotIn => (" notin (", true),
            Operator::GreaterThan => (">", false),
            Operator::LessThan => ("<", false),
        };
        f.write_str(operator)?;
        f.write_str(&self.values.join(","))?;
        if parenthesised {
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// A parsed label selector: every requirement must hold. Empty, it selects
/// everything.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// The requirements, sorted by key as `labels.Parse` sorts them.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// Whether it selects everything (`Empty()`).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether these labels meet every requirement (`Matches`).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_with(|key| labels.get(key).map(String::as_str))
    }

    /// [`Self::matches`] with `get` looking a label up.
    pub fn matches_with<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.requirements.iter().all(|r| r.matches_with(&get))
    }

    /// The selector as kube-apiserver writes it (`String()`), which it
    /// parses back to this selector.
    pub fn encode(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, requirement) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{requirement}")?;
        }
        Ok(())
    }
}

/// `labels.Parse`, through `metav1.Convert_string_To_labels_Selector`: the
/// selector, or the message of kube-apiserver's 400.
pub fn parse_label_selector(text: &str) -> Result<LabelSelector, String> {
    let mut parser = Parser {
        items: Lexer::new(text).scan(),
        position: 0,
    };
    let mut requirements = parser.parse()?;
    // `sort.Sort(ByKey(items))`. Go's sort is not stable beyond 12 items, so
    // with more than 12 requirements, those with the same key may be written
    // in another order than kube-apiserver's String(); it is the same
    // selector.
    requirements.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(LabelSelector { requirements })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Token {
    EndOfString,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

/// `string2token`.
fn keyword(literal: &[u8]) -> Option<Token> {
    Some(match literal {
        b")" => Token::ClosedPar,
        b"," => Token::Comma,
        b"!" => Token::DoesNotExist,
        b"==" => Token::DoubleEquals,
        b"=" => Token::Equals,
        b">" => Token::GreaterThan,
        b"in" => Token::In,
        b"<" => Token::LessThan,
        b"!=" => Token::NotEquals,
        b"notin" => Token::NotIn,
        b"(" => Token::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special_symbol(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// The `Lexer`, byte by byte as Go's: `read` gives 0 at the end without
/// moving, and 0 for a NUL byte, moving past it.
struct Lexer<'a> {
    s: &'a [u8],
    pos: usize,
}

impl<'a> Lexer<'a> {
    fn new(text: &'a str) -> Self {
        Self {
            s: text.as_bytes(),
            pos: 0,
        }
    }

    fn read(&mut self) -> u8 {
        match self.s.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                b
            }
            None => 0,
        }
    }

    fn unread(&mut self) {
        self.pos = self.pos.saturating_sub(1);
    }

    /// `scan`: every token, the last one the end of the string.
    fn scan(mut self) -> Vec<(Token, String)> {
        let mut items = Vec::new();
        loop {
            let (token, literal) = self.lex();
            items.push((token, literal));
            if token == Token::EndOfString {
                return items;
            }
        }
    }

    fn lex(&mut self) -> (Token, String) {
        let mut ch = self.read();
        while is_whitespace(ch) {
            ch = self.read();
        }
        if ch == 0 {
            return (Token::EndOfString, String::new());
        }
        self.unread();
        if is_special_symbol(ch) {
            self.scan_special_symbol()
        } else {
            self.scan_id_or_keyword()
        }
    }

    fn scan_id_or_keyword(&mut self) -> (Token, String) {
        let mut buffer = Vec::new();
        loop {
            match self.read() {
                0 => break,
                ch if is_special_symbol(ch) || is_whitespace(ch) => {
                    self.unread();
                    break;
                }
                ch => buffer.push(ch),
            }
        }
        let token = keyword(&buffer).unwrap_or(Token::Identifier);
        (token, text_of(buffer))
    }

    /// The longest operator of special symbols; the first symbol always is
    /// one, so Go's `ErrorToken` never comes out of here.
    fn scan_special_symbol(&mut self) -> (Token, String) {
        let mut buffer = Vec::new();
        let mut last: Option<(Token, usize)> = None;
        loop {
            match self.read() {
                0 => break,
                ch if is_special_symbol(ch) => {
                    buffer.push(ch);
                    if let Some(token) = keyword(&buffer) {
                        last = Some((token, buffer.len()));
                    } else if last.is_some() {
                        self.unread();
                        break;
                    }
                }
                _ => {
                    self.unread();
                    break;
                }
            }
        }
        match last {
            Some((token, len)) => {
                buffer.truncate(len);
                (token, text_of(buffer))
            }
            None => (Token::EndOfString, String::new()),
        }
    }
}

/// A literal's text: whole characters, since the lexer cuts only at ASCII.
fn text_of(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Where the parser is: `in` and `notin` are identifiers among values.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

struct Parser {
    items: Vec<(Token, String)>,
    position: usize,
}

impl Parser {
    fn item(&self, index: usize, context: Context) -> (Token, String) {
        let (token, literal) = self
            .items
            .get(index)
            .cloned()
            .unwrap_or((Token::EndOfString, String::new()));
        match token {
            Token::In | Token::NotIn if context == Context::Values => (Token::Identifier, literal),
            _ => (token, literal),
        }
    }

    fn lookahead(&self, context: Context) -> (Token, String) {
        self.item(self.position, context)
    }

    fn consume(&mut self, context: Context) -> (Token, String) {
        self.position += 1;
        self.item(self.position - 1, context)
    }

    /// `(*Parser).parse`.
    fn parse(&mut self) -> Result<Vec<Requirement>, String> {
        let mut requirements = Vec::new();
        loop {
            let (token, literal) = self.lookahead(Context::Values);
            match token {
                Token::Identifier | Token::DoesNotExist => {
                    let requirement = self
                        .parse_requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    requirements.push(requirement);
                    let (token, literal) = self.consume(Context::Values);
                    match token {
                        Token::EndOfString => return Ok(requirements),
                        Token::Comma => {
                            let (next, literal) = self.lookahead(Context::Values);
                            if next != Token::Identifier && next != Token::DoesNotExist {
                                return Err(format!(
                                    "found '{literal}', expected: identifier after ','"
                                ));
                            }
                        }
                        _ => {
                            return Err(format!(
                                "found '{literal}', expected: ',' or 'end of string'"
                            ));
                        }
                    }
                }
                Token::EndOfString => return Ok(requirements),
                _ => {
                    return Err(format!(
                        "found '{literal}', expected: !, identifier, or 'end of string'"
                    ));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, String> {
        let (key, operator) = self.parse_key_and_infer_operator()?;
        if let Some(operator @ (Operator::Exists | Operator::DoesNotExist)) = operator {
            return new_requirement(key, operator, Vec::new());
        }
        let operator = self.parse_operator()?;
        let values = match operator {
            Operator::In | Operator::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        };
        // `values.List()`: sorted, without duplicates.
        new_requirement(key, operator, values.into_iter().collect())
    }

    /// The key, and `!` or `exists` when that is the whole requirement
    /// (`!key` is `!key` whatever follows).
    fn parse_key_and_infer_operator(&mut self) -> Result<(String, Option<Operator>), String> {
        let mut operator = None;
        let (mut token, mut literal) = self.consume(Context::Values);
        if token == Token::DoesNotExist {
            operator = Some(Operator::DoesNotExist);
            (token, literal) = self.consume(Context::Values);
        }
        if token != Token::Identifier {
            return Err(format!("found '{literal}', expected: identifier"));
        }
        // Validated with the parser's field path, which is nil.
        validate_label_key(&literal, "<nil>")?;
        let (next, _) = self.lookahead(Context::Values);
        if matches!(next, Token::EndOfString | Token::Comma) && operator.is_none() {
            operator = Some(Operator::Exists);
        }
        Ok((literal, operator))
    }

    fn parse_operator(&mut self) -> Result<Operator, String> {
        let (token, literal) = self.consume(Context::KeyAndOperator);
        Ok(match token {
            Token::In => Operator::In,
            Token::Equals => Operator::Equals,
            Token::DoubleEquals => Operator::DoubleEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            Token::NotIn => Operator::NotIn,
            Token::NotEquals => Operator::NotEquals,
            _ => {
                return Err(format!(
                    "found '{literal}', expected: in, notin, =, ==, !=, gt, lt"
                ));
            }
        })
    }

    /// `(a,b)`, `()` (the empty value), `(,a)`, `(a,,b)`...
    fn parse_values(&mut self) -> Result<BTreeSet<String>, String> {
        let (token, literal) = self.consume(Context::Values);
        if token != Token::OpenPar {
            return Err(format!("found '{literal}' expected: '('"));
        }
        let (token, literal) = self.lookahead(Context::Values);
        match token {
            Token::Identifier | Token::Comma => {
                let values = self.parse_identifiers_list()?;
                // Cannot fail: the list ends only before a `)`. The message
                // names the token before the list, as Go's does.
                if self.consume(Context::Values).0 != Token::ClosedPar {
                    return Err(format!("found '{literal}', expected: ')'"));
                }
                Ok(values)
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                Ok(BTreeSet::from([String::new()]))
            }
            _ => Err(format!(
                "found '{literal}', expected: ',', ')' or identifier"
            )),
        }
    }

    fn parse_identifiers_list(&mut self) -> Result<BTreeSet<String>, String> {
        let mut values = BTreeSet::new();
        loop {
            let (token, literal) = self.consume(Context::Values);
            match token {
                Token::Identifier => {
                    values.insert(literal);
                    let (next, literal) = self.lookahead(Context::Values);
                    match next {
                        Token::Comma => continue,
                        Token::ClosedPar => return Ok(values),
                        _ => return Err(format!("found '{literal}', expected: ',' or ')'")),
                    }
                }
                Token::Comma => {
                    if values.is_empty() {
                        values.insert(String::new());
                    }
                    match self.lookahead(Context::Values).0 {
                        Token::ClosedPar => {
                            values.insert(String::new());
                            return Ok(values);
                        }
                        Token::Comma => {
                            self.consume(Context::Values);
                            values.insert(String::new());
                        }
                        _ => {}
                    }
                }
                _ => return Err(format!("found '{literal}', expected: ',', or identifier")),
            }
        }
    }

    fn parse_exact_value(&mut self) -> Result<BTreeSet<String>, String> {
        if matches!(
            self.lookahead(Context::Values).0,
            Token::EndOfString | Token::Comma
        ) {
            return Ok(BTreeSet::from([String::new()]));
        }
        let (token, literal) = self.consume(Context::Values);
        if token == Token::Identifier {
            return Ok(BTreeSet::from([literal]));
        }
        Err(format!("found '{literal}', expected: identifier"))
    }
}

/// `NewRequirement`'s checks, as far as a parsed requirement can fail them:
/// its key was checked already, and the parser always gives the right
/// number of values, so what is left is `gt`/`lt`'s integer and each
/// value's syntax. The errors are a `field.ErrorList` aggregate.
fn new_requirement(
    key: String,
    operator: Operator,
    values: Vec<String>,
) -> Result<Requirement, String> {
    let mut errors: Vec<String> = Vec::new();
    if matches!(operator, Operator::GreaterThan | Operator::LessThan) {
        for (i, value) in values.iter().enumerate() {
            if go_parse_int(value).is_none() {
                errors.push(format!(
                    "values[{i}]: Invalid value: {}: for 'Gt', 'Lt' operators, the value must be an integer",
                    go_quote(value)
                ));
            }
        }
    }
    for (i, value) in values.iter().enumerate() {
        let problems = label_value_errors(value);
        if !problems.is_empty() {
            errors.push(format!(
                "values[{i}][{key}]: Invalid value: {}: {}",
                go_quote(value),
                problems.join("; ")
            ));
        }
    }
    if errors.is_empty() {
        return Ok(Requirement {
            key,
            operator,
            values,
        });
    }
    Err(aggregate(errors))
}

/// `field.ErrorList.ToAggregate().Error()`: one message as it is, several
/// (without repeats) as `[a, b]`.
fn aggregate(errors: Vec<String>) -> String {
    let mut seen = BTreeSet::new();
    let unique: Vec<String> = errors
        .into_iter()
        .filter(|e| seen.insert(e.clone()))
        .collect();
    match unique.as_slice() {
        [one] => one.clone(),
        _ => format!("[{}]", unique.join(", ")),
    }
}

/// `validateLabelKey`: `field.Invalid(path, key, <IsQualifiedName's
/// errors joined by "; ">)`.
fn validate_label_key(key: &str, path: &str) -> Result<(), String> {
    let problems = qualified_name_errors(key);
    if problems.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{path}: Invalid value: {}: {}",
        go_quote(key),
        problems.join("; ")
    ))
}

const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";

/// `validation.RegexError`.
fn regex_error(message: &str, format: &str, examples: &[&str]) -> String {
    let mut out = format!("{message} (e.g. ");
    for (i, example) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push_str(&format!("'{example}', "));
    }
    out.push_str(&format!("regex used for validation is '{format}')"));
    out
}

/// `^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`
fn is_qualified_name_part(text: &str) -> bool {
    let bytes = text.as_bytes();
    match bytes {
        [] => false,
        [first, .., last] | [first @ last] => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        }
    }
}

/// `validation.IsQualifiedName`.
fn qualified_name_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_string());
            } else {
                errors.extend(
                    dns1123_subdomain_errors(prefix)
                        .into_iter()
                        .map(|e| format!("prefix part {e}")),
                );
            }
            *name
        }
        _ => {
            return vec![format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(
                    QUALIFIED_NAME_ERR,
                    QUALIFIED_NAME_FMT,
                    &["MyName", "my.name", "123-abc"]
                )
            )];
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errors.push("name part must be no more than 63 characters".to_string());
    }
    if !is_qualified_name_part(name) {
        errors.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_ERR,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errors
}

/// `validation.IsDNS1123Subdomain`.
fn dns1123_subdomain_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 253 {
        errors.push("must be no more than 253 characters".to_string());
    }
    let label = |l: &str| {
        let bytes = l.as_bytes();
        let inner = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
        match bytes {
            [] => false,
            [first, .., last] | [first @ last] => {
                inner(first) && inner(last) && bytes.iter().all(|b| inner(b) || *b == b'-')
            }
        }
    };
    if !value.split('.').all(label) {
        errors.push(regex_error(
            DNS1123_SUBDOMAIN_ERR,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errors
}

/// `validation.IsValidLabelValue`.
fn label_value_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 63 {
        errors.push("must be no more than 63 characters".to_string());
    }
    if !(value.is_empty() || is_qualified_name_part(value)) {
        errors.push(regex_error(
            LABEL_VALUE_ERR,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errors
}

/// Go's `strconv.ParseInt(text, 10, 64)`, which Rust's `i64` parsing
/// matches: an optional sign, then decimal digits, in range.
fn go_parse_int(text: &str) -> Option<i64> {
    text.parse().ok()
}

// ---- field selectors ----

/// A field selector term's operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FieldOperator {
    /// `key=value`
    Equals,
    /// `key==value`, the same as `=` (kube-apiserver writes it `=`)
    DoubleEquals,
    /// `key!=value`
    NotEquals,
}

impl FieldOperator {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Equals => "=",
            Self::DoubleEquals => "==",
            Self::NotEquals => "!=",
        }
    }

    /// Whether the term wants the field equal to its value.
    pub fn is_equal(self) -> bool {
        self != Self::NotEquals
    }
}

/// One term of a field selector: the key as written (never checked here),
/// the operator, and the value unescaped.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FieldTerm {
    pub key: String,
    pub operator: FieldOperator,
    pub value: String,
}

impl FieldTerm {
    /// `hasTerm`/`notHasTerm.Matches`: a missing field is the empty string.
    pub fn matches_with<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        (get(&self.key).unwrap_or("") == self.value) == self.operator.is_equal()
    }
}

/// `hasTerm`/`notHasTerm.String`: the value escaped, `==` written `=`.
impl fmt::Display for FieldTerm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let operator = if self.operator.is_equal() { "=" } else { "!=" };
        write!(
            f,
            "{}{operator}{}",
            self.key,
            escape_field_value(&self.value)
        )
    }
}

/// A parsed field selector: every term must hold. Empty, it selects
/// everything. Two selectors are equal when they have the same terms, in
/// any order, `==` the same as `=`.
#[derive(Clone, Debug, Default, Eq)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
}

impl PartialEq for FieldSelector {
    fn eq(&self, other: &Self) -> bool {
        fn canonical(s: &FieldSelector) -> Vec<(&str, bool, &str)> {
            let mut terms: Vec<_> = s
                .terms
                .iter()
                .map(|t| (t.key.as_str(), t.operator.is_equal(), t.value.as_str()))
                .collect();
            terms.sort();
            terms
        }
        canonical(self) == canonical(other)
    }
}

impl FieldSelector {
    /// The terms, in kube-apiserver's order (sorted as written).
    pub fn terms(&self) -> &[FieldTerm] {
        &self.terms
    }

    /// Whether it selects everything (`Empty()`).
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Whether these fields meet every term (`Matches` on a `fields.Set`).
    pub fn matches(&self, fields: &BTreeMap<String, String>) -> bool {
        self.matches_with(|key| fields.get(key).map(String::as_str))
    }

    /// [`Self::matches`] with `get` looking a field up.
    pub fn matches_with<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.terms.iter().all(|t| t.matches_with(&get))
    }

    /// The selector as kube-apiserver writes it (`String()`), which it
    /// parses back to this selector.
    pub fn encode(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, term) in self.terms.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{term}")?;
        }
        Ok(())
    }
}

/// `fields.ParseSelector`, through `metav1.Convert_string_To_fields_Selector`:
/// the selector, or the message of kube-apiserver's 400.
pub fn parse_field_selector(text: &str) -> Result<FieldSelector, String> {
    let mut parts = split_terms(text);
    parts.sort_unstable();
    let mut terms = Vec::new();
    for part in parts.into_iter().filter(|p| !p.is_empty()) {
        let Some((key, operator, value)) = split_term(part) else {
            return Err(format!(
                "invalid selector: '{text}'; can't understand '{part}'"
            ));
        };
        let value = unescape_field_value(value)?;
        // `Transform` with the identity: a term with neither key nor value
        // is `Everything()`, dropped from the conjunction.
        if key.is_empty() && value.is_empty() {
            continue;
        }
        terms.push(FieldTerm {
            key: key.to_string(),
            operator,
            value,
        });
    }
    Ok(FieldSelector { terms })
}

/// `splitTerms`: on commas not escaped by a backslash, kept as written.
fn split_terms(text: &str) -> Vec<&str> {
    if text.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let (mut start, mut escaped) = (0, false);
    for (i, c) in text.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == ',' {
            terms.push(&text[start..i]);
            start = i + 1;
        }
    }
    terms.push(&text[start..]);
    terms
}

/// `splitTerm`: at the first place `!=`, `==` or `=` begins.
fn split_term(term: &str) -> Option<(&str, FieldOperator, &str)> {
    for (i, _) in term.char_indices() {
        for (written, operator) in [
            ("!=", FieldOperator::NotEquals),
            ("==", FieldOperator::DoubleEquals),
            ("=", FieldOperator::Equals),
        ] {
            if let Some(rest) = term[i..].strip_prefix(written) {
                return Some((&term[..i], operator, rest));
            }
        }
    }
    None
}

/// `fields.UnescapeValue`: `\\`, `\,` and `\=` are the only escapes, and
/// `,` and `=` must be escaped.
fn unescape_field_value(value: &str) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut escaped = false;
    for c in value.chars() {
        if escaped {
            if !matches!(c, '\\' | ',' | '=') {
                return Err(format!(
                    "invalid field selector: invalid escape sequence: \\{c}"
                ));
            }
            out.push(c);
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            // `UnescapedRune`'s message prints the rune as a number.
            ',' | '=' => {
                return Err(format!(
                    "invalid field selector: unescaped character in value: {}",
                    c as u32
                ));
            }
            c => out.push(c),
        }
    }
    if escaped {
        return Err("invalid field selector: invalid escape sequence: \\".to_string());
    }
    Ok(out)
}

/// `fields.EscapeValue`: a backslash before `\`, `,` and `=`.
pub fn escape_field_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn label_error(text: &str) -> String {
        parse_label_selector(text).expect_err(text)
    }

    fn field_error(text: &str) -> String {
        parse_field_selector(text).expect_err(text)
    }

    const LABEL_VALUE_REGEX: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
    const NAME_REGEX: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

    /// Each operator (`(*Parser).parseOperator`, `(*Requirement).Matches`)
    /// and how kube-apiserver writes it back (`(*Requirement).String`).
    #[test]
    fn every_label_operator_parses_matches_and_is_written_back() {
        use Operator::*;
        let cases: &[(&str, Operator, &[&str], &str)] = &[
            ("a=b", Equals, &["b"], "a=b"),
            ("a == b", DoubleEquals, &["b"], "a==b"),
            ("a!=b", NotEquals, &["b"], "a!=b"),
            ("a in (c, b,b)", In, &["b", "c"], "a in (b,c)"),
            ("a notin (b)", NotIn, &["b"], "a notin (b)"),
            ("a", Exists, &[], "a"),
            ("!a", DoesNotExist, &[], "!a"),
            ("a>5", GreaterThan, &["5"], "a>5"),
            ("a < 5", LessThan, &["5"], "a<5"),
            ("a=", Equals, &[""], "a="),
            ("a in ()", In, &[""], "a in ()"),
            ("a in (,)", In, &[""], "a in ()"),
            ("a in (b,,c)", In, &["", "b", "c"], "a in (,b,c)"),
            (
                "in in (in, notin)",
                In,
                &["in", "notin"],
                "in in (in,notin)",
            ),
            (
                "example.com/a-b_c.d=V.1",
                Equals,
                &["V.1"],
                "example.com/a-b_c.d=V.1",
            ),
        ];
        for (text, operator, values, written) in cases {
            let selector = parse_label_selector(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            let [requirement] = selector.requirements() else {
                panic!("{text}: one requirement");
            };
            assert_eq!(requirement.operator(), *operator, "{text}");
            assert_eq!(requirement.values(), *values, "{text}");
            assert_eq!(selector.encode(), *written, "{text}");
            assert_eq!(parse_label_selector(written), Ok(selector), "{text}");
        }
        let on = |text: &str, pairs: &[(&str, &str)]| {
            parse_label_selector(text).unwrap().matches(&labels(pairs))
        };
        assert!(on("a=b", &[("a", "b")]) && !on("a=b", &[]) && !on("a==b", &[("a", "c")]));
        assert!(on("a!=b", &[]) && on("a!=b", &[("a", "c")]) && !on("a!=b", &[("a", "b")]));
        assert!(on("a in (b,c)", &[("a", "c")]) && !on("a in (b,c)", &[]));
        assert!(on("a notin (b,c)", &[]) && !on("a notin (b,c)", &[("a", "b")]));
        assert!(on("a", &[("a", "")]) && !on("a", &[]));
        assert!(on("!a", &[]) && !on("!a", &[("a", "")]));
        assert!(on("a>5", &[("a", "6")]) && !on("a>5", &[("a", "5")]));
        assert!(on("a>5", &[("a", "+6")]), "the label is read by ParseInt");
        assert!(!on("a>5", &[("a", "x")]) && !on("a>5", &[]));
        assert!(on("a<5", &[("a", "-7")]) && !on("a<5", &[("a", "99999999999999999999")]));
        assert!(on("", &[]) && on("  ", &[("a", "b")]));
        assert!(on("a=b,c", &[("a", "b"), ("c", "")]) && !on("a=b,c", &[("a", "b")]));
    }

    #[test]
    fn requirements_are_sorted_by_key() {
        let selector = parse_label_selector("b=1,a,!c,a=2").unwrap();
        assert_eq!(selector.encode(), "a,a=2,b=1,!c");
    }

    /// The lexer (`(*Lexer).Lex`) works on bytes: only space, tab, CR and
    /// LF are blanks, and NUL reads as the end of the string.
    #[test]
    fn the_lexer_reads_bytes_as_gos() {
        assert_eq!(
            parse_label_selector(" \t\r\na\n=\tb ").unwrap().encode(),
            "a=b"
        );
        assert_eq!(
            parse_label_selector("a=b \0garbage(").unwrap().encode(),
            "a=b",
            "a NUL where a token begins ends the selector"
        );
        assert_eq!(
            label_error("a=b\0 garbage("),
            "found 'garbage', expected: ',' or 'end of string'",
            "a NUL ending a token is skipped"
        );
        assert_eq!(
            label_error("a,\0"),
            "found '', expected: identifier after ','"
        );
        assert_eq!(
            label_error("a\0b"),
            "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt",
            "a NUL inside a token ends it and is skipped"
        );
        assert_eq!(parse_label_selector("a=\0b").unwrap().encode(), "a=b");
        assert_eq!(
            label_error("a\u{a0}=b"),
            format!(
                "unable to parse requirement: <nil>: Invalid value: \"a\\u00a0\": name part {NAME_REGEX}"
            ),
            "a no-break space is no blank"
        );
        assert_eq!(
            parse_label_selector("a!==b").unwrap_err(),
            "unable to parse requirement: found '=', expected: identifier"
        );
    }

    /// `(*Parser).parse` and its helpers, each error.
    #[test]
    fn label_syntax_errors_are_kube_apiservers() {
        for (text, error) in [
            // parse
            ("a=b c", "found 'c', expected: ',' or 'end of string'"),
            ("!a=b", "found '=', expected: ',' or 'end of string'"),
            ("a,", "found '', expected: identifier after ','"),
            ("a=b,,c", "found ',', expected: identifier after ','"),
            (
                ",a",
                "found ',', expected: !, identifier, or 'end of string'",
            ),
            (
                "=a",
                "found '=', expected: !, identifier, or 'end of string'",
            ),
            // parseKeyAndInferOperator
            (
                "!",
                "unable to parse requirement: found '', expected: identifier",
            ),
            (
                "!!a",
                "unable to parse requirement: found '!', expected: identifier",
            ),
            // parseOperator
            (
                "a b",
                "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt",
            ),
            (
                "a gt 5",
                "unable to parse requirement: found 'gt', expected: in, notin, =, ==, !=, gt, lt",
            ),
            (
                "a (",
                "unable to parse requirement: found '(', expected: in, notin, =, ==, !=, gt, lt",
            ),
            // parseValues
            (
                "a in b",
                "unable to parse requirement: found 'b' expected: '('",
            ),
            (
                "a notin",
                "unable to parse requirement: found '' expected: '('",
            ),
            (
                "a in (=",
                "unable to parse requirement: found '=', expected: ',', ')' or identifier",
            ),
            // parseIdentifiersList
            (
                "a in (b",
                "unable to parse requirement: found '', expected: ',' or ')'",
            ),
            (
                "a in (b c)",
                "unable to parse requirement: found 'c', expected: ',' or ')'",
            ),
            (
                "a in (b,=)",
                "unable to parse requirement: found '=', expected: ',', or identifier",
            ),
            // parseExactValue
            (
                "a=(",
                "unable to parse requirement: found '(', expected: identifier",
            ),
            (
                "a=)",
                "unable to parse requirement: found ')', expected: identifier",
            ),
            // after a whole requirement
            ("a in ()x", "found 'x', expected: ',' or 'end of string'"),
        ] {
            assert_eq!(label_error(text), error, "{text:?}");
        }
    }

    /// `validateLabelKey` (with the parser's nil path) and
    /// `validation.IsQualifiedName`.
    #[test]
    fn bad_keys_are_refused_in_kube_apiservers_words() {
        let subdomain = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
        let long = "x".repeat(64);
        let long_prefix = format!("{}/a", "p".repeat(254));
        for (key, problems) in [
            ("-a", format!("name part {NAME_REGEX}")),
            ("/b", "prefix part must be non-empty".to_string()),
            ("A/b", format!("prefix part {subdomain}")),
            (
                "a/",
                format!("name part must be non-empty; name part {NAME_REGEX}"),
            ),
            (
                "a/b/c",
                format!(
                    "a qualified name {NAME_REGEX} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
                ),
            ),
            (
                long.as_str(),
                "name part must be no more than 63 characters".to_string(),
            ),
            (
                long_prefix.as_str(),
                "prefix part must be no more than 253 characters".to_string(),
            ),
            ("é\u{200b}", format!("name part {NAME_REGEX}")),
        ] {
            assert_eq!(
                label_error(&format!("{key}=v")),
                format!(
                    "unable to parse requirement: <nil>: Invalid value: {}: {problems}",
                    go_quote(key)
                ),
                "{key}"
            );
        }
        assert_eq!(
            label_error("é\u{200b}\u{1}"),
            format!(
                "unable to parse requirement: <nil>: Invalid value: \"é\\u200b\\x01\": name part {NAME_REGEX}"
            )
        );
    }

    /// `NewRequirement`'s value checks, aggregated (`ToAggregate`).
    #[test]
    fn bad_values_are_refused_in_kube_apiservers_words() {
        assert_eq!(
            label_error("a=-"),
            format!(
                "unable to parse requirement: values[0][a]: Invalid value: \"-\": {LABEL_VALUE_REGEX}"
            )
        );
        assert_eq!(
            label_error("a in (_,ok,-)"),
            format!(
                "unable to parse requirement: [values[0][a]: Invalid value: \"-\": {LABEL_VALUE_REGEX}, values[1][a]: Invalid value: \"_\": {LABEL_VALUE_REGEX}]"
            ),
            "values are checked in sorted order"
        );
        let long = "v".repeat(64);
        assert_eq!(
            label_error(&format!("a={long}")),
            format!(
                "unable to parse requirement: values[0][a]: Invalid value: \"{long}\": must be no more than 63 characters"
            )
        );
        assert_eq!(
            label_error("a>x"),
            "unable to parse requirement: values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators, the value must be an integer"
        );
        assert_eq!(
            label_error("a<"),
            "unable to parse requirement: values[0]: Invalid value: \"\": for 'Gt', 'Lt' operators, the value must be an integer"
        );
        assert_eq!(
            label_error("a>-1"),
            format!(
                "unable to parse requirement: values[0][a]: Invalid value: \"-1\": {LABEL_VALUE_REGEX}"
            ),
            "an integer, but not a label value"
        );
        assert_eq!(
            label_error("a>-x"),
            format!(
                "unable to parse requirement: [values[0]: Invalid value: \"-x\": for 'Gt', 'Lt' operators, the value must be an integer, values[0][a]: Invalid value: \"-x\": {LABEL_VALUE_REGEX}]"
            )
        );
    }

    /// `fields.ParseSelector`: operators, escapes (`UnescapeValue`), and
    /// `String()`.
    #[test]
    fn field_selectors_parse_match_and_are_written_back() {
        let selector = parse_field_selector("spec.x==a\\,b,metadata.name!=n\\=\\\\,z=").unwrap();
        let terms: Vec<_> = selector
            .terms()
            .iter()
            .map(|t| (t.key.as_str(), t.operator, t.value.as_str()))
            .collect();
        assert_eq!(
            terms,
            [
                ("metadata.name", FieldOperator::NotEquals, "n=\\"),
                ("spec.x", FieldOperator::DoubleEquals, "a,b"),
                ("z", FieldOperator::Equals, ""),
            ],
            "sorted as written"
        );
        assert_eq!(selector.encode(), "metadata.name!=n\\=\\\\,spec.x=a\\,b,z=");
        assert_eq!(
            parse_field_selector(&selector.encode()),
            Ok(selector.clone())
        );
        let fields = labels(&[("metadata.name", "x"), ("spec.x", "a,b")]);
        assert!(selector.matches(&fields), "a missing field is empty");
        assert!(!selector.matches(&labels(&[("spec.x", "a,b"), ("z", "1")])));
        for (text, written) in [
            ("", ""),
            (",", ""),
            ("=", ""),
            ("!=,a=b", "a=b"),
            ("==", ""),
            ("=x", "=x"),
            ("a!b=c", "a!b=c"),
            ("a\\,b=c", "a\\,b=c"),
            ("b=1,a=2", "a=2,b=1"),
            (" a = b ", " a = b "),
        ] {
            let parsed = parse_field_selector(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(parsed.encode(), written, "{text}");
        }
        assert!(
            parse_field_selector("!=").unwrap().matches(&labels(&[])),
            "dropped, not nothing"
        );
    }

    #[test]
    fn field_selector_errors_are_kube_apiservers() {
        for (text, error) in [
            (
                "bogus",
                "invalid selector: 'bogus'; can't understand 'bogus'",
            ),
            ("a=b,c", "invalid selector: 'a=b,c'; can't understand 'c'"),
            (
                "a=b=c",
                "invalid field selector: unescaped character in value: 61",
            ),
            (
                "a!==b",
                "invalid field selector: unescaped character in value: 61",
            ),
            (
                "a=\\x",
                "invalid field selector: invalid escape sequence: \\x",
            ),
            (
                "a=\\é",
                "invalid field selector: invalid escape sequence: \\é",
            ),
            (
                "a=b\\",
                "invalid field selector: invalid escape sequence: \\",
            ),
            // Sorted before they are read: `x=\q` comes first.
            (
                "z=1,y,x=\\q",
                "invalid field selector: invalid escape sequence: \\q",
            ),
        ] {
            assert_eq!(field_error(text), error, "{text:?}");
        }
    }

    /// Pieces selectors are made of, well-formed and not.
    fn selector_text() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            4 => "[a-c]{1,3}",
            1 => Just("example.com/".to_string()),
            2 => "[=!<>(),]",
            1 => Just("==".to_string()),
            1 => Just("!=".to_string()),
            1 => Just(" in ".to_string()),
            1 => Just(" notin ".to_string()),
            2 => "[ \t]",
            1 => "[-_./\\\\0-9]",
            1 => "\\PC",
            1 => Just("\0".to_string()),
            1 => Just("x".repeat(64)),
        ];
        proptest::collection::vec(piece, 0..12).prop_map(|pieces| pieces.concat())
    }

    proptest! {
        #[test]
        fn arbitrary_input_never_panics(text in "\\PC{0,40}", bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let lossy = String::from_utf8_lossy(&bytes);
            for text in [text.as_str(), &lossy] {
                let _ = parse_label_selector(text).map(|s| s.matches(&BTreeMap::new()));
                let _ = parse_field_selector(text).map(|s| s.matches(&BTreeMap::new()));
            }
        }

        /// encode(parse(x)) parses to the same selector, and is then a
        /// fixed point.
        #[test]
        fn what_is_written_back_parses_to_the_same_selector(text in selector_text()) {
            if let Ok(selector) = parse_label_selector(&text) {
                let written = selector.encode();
                prop_assert_eq!(parse_label_selector(&written), Ok(selector), "{:?} -> {:?}", text, written);
            }
            if let Ok(selector) = parse_field_selector(&text) {
                let written = selector.encode();
                let again = parse_field_selector(&written);
                prop_assert_eq!(&again, &Ok(selector), "{:?} -> {:?}", text, written);
                let again = again.unwrap().encode();
                prop_assert_eq!(parse_field_selector(&again).map(|s| s.encode()), Ok(again));
            }
        }
    }
}
