//! JSON Patch (RFC 6902, `application/json-patch+json`) and JSON Merge Patch
//! (RFC 7386, `application/merge-patch+json`) applied as kube-apiserver
//! v1.34 applies them, with `gopkg.in/evanphx/json-patch.v4` v4.12.0
//! (`DecodePatch` then `Patch.Apply`, with `SupportNegativeIndices` and a
//! 3 MiB `AccumulatedCopySizeLimit`; `MergePatch`), so that the object
//! bindery checks and stores after a `PATCH` is the one kube-apiserver would
//! have computed, and a patch it refuses is refused. The library's quirks are
//! kept, not fixed: `replace` of a missing key adds it, `add` at a negative
//! index counts from the grown array, `copy` of a missing key copies `null`,
//! a `test` of a missing key against `null` passes, a merge patch's nulls
//! are pruned from new objects but not from an array replacing an object,
//! and so on; each function below names the Go function it follows. Where
//! the library dereferences a nil pointer or writes to a nil map,
//! kube-apiserver's panic recovery answers 500; that is
//! [`PatchError::Panic`] here.
//!
//! Values go through Go's text on the way, and that shows in two places:
//! - a document number is the text Go's encoder writes for it, decoded again
//!   by kube-apiserver, so a `float64` with an integral value in `int64`'s
//!   range comes out an integer (`1.0` is written `1`);
//! - `test` compares scalars by their text: the document's as Go writes it,
//!   the patch's as the client wrote it. bindery has the client's value, not
//!   its text, and takes the text to be what Go's encoder writes (as kubectl
//!   and client-go send), except that a `float64` with an integral value in
//!   `int64`'s range can only have been written with a fraction or an
//!   exponent (it would have decoded to an integer otherwise), so it never
//!   equals a document number: `1.0` fails against a stored `1`, which
//!   passes against `1`. A client spelling a value otherwise (`"\u0041"`
//!   for `"A"`, `1.50`, `"<"` unescaped) gets a `test` that passes here and
//!   fails there. Copy sizes are counted on the same texts.
//!
//! Objects come out with their keys sorted, as Go's encoder writes a map.
//! Bodies may nest 10000 deep ([`super::json::MAX_DEPTH`]), deeper than
//! recursion (or serde_json's own `clone`) survives on a 2 MiB stack, so
//! nodes live in an arena, linked by index as Go's by pointer, and every
//! walk keeps its own stack. Pure.

use std::collections::BTreeMap;

use serde_json::{Map, Number, Value};

/// kube-apiserver's `maxJSONPatchOperations`: a JSON patch with more
/// operations is refused with 413 before it is applied (the caller's check:
/// `The allowed maximum operations in a JSON patch is 10000, got N`).
pub const MAX_OPERATIONS: usize = 10_000;

/// The `AccumulatedCopySizeLimit` kube-apiserver sets
/// (`JSONPatchMaxCopyBytes`): the bytes all `copy` operations of a patch
/// may copy, counted in Go's JSON text.
pub const COPY_SIZE_LIMIT: usize = 3 * 1024 * 1024;

/// Why a patch was not applied.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// `DecodePatch` refused a JSON patch body: not an array, or an element
    /// that is not an object. kube-apiserver answers 400 with this message.
    #[error("json: cannot unmarshal {found} into Go value of type {target}")]
    Decode {
        found: &'static str,
        target: &'static str,
    },
    /// An operation did not apply (or the document is not one the library
    /// reads). kube-apiserver answers 422 with the library's words, which
    /// these only resemble.
    #[error("{0}")]
    Failed(String),
    /// The library panics on this patch; kube-apiserver answers 500.
    #[error("the patch library panics: {0}")]
    Panic(&'static str),
    /// `MergePatch`'s `ErrBadJSONPatch`: the merge patch is `null` or a
    /// string, number or boolean. kube-apiserver answers 400.
    #[error("Invalid JSON Patch")]
    InvalidMergePatch,
    /// `MergePatch`'s `ErrBadJSONDoc`: the document is `null`.
    #[error("Invalid JSON Document")]
    InvalidDocument,
}

fn failed(message: impl Into<String>) -> PatchError {
    PatchError::Failed(message.into())
}

const NIL_VALUE: &str = "an operation without a value is dereferenced";
const NIL_RAW: &str = "a path goes through an operation's null value";
const NIL_MAP: &str = "assignment to entry in nil map";
const NIL_ELEMENT: &str = "test compares arrays holding null";

// ---- decoding: Go's json.Unmarshal into a jsonpatch.Patch ----

/// One operation as the library holds it (an `Operation`, a map of raw
/// JSON): each field as its accessor reads it, borrowed from the body.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Operation<'p> {
    /// `Kind()`: `op` when it is a string; anything else is unknown.
    op: Option<&'p str>,
    /// `Path()`: `path` when it is a string; anything else fails.
    path: Option<&'p str>,
    /// `From()`, as `path`.
    from: Option<&'p str>,
    /// `value()`.
    value: OpValue<'p>,
}

/// An operation's `value`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
enum OpValue<'p> {
    /// No `value` key: `value()` is a nil `*lazyNode`.
    #[default]
    Absent,
    /// `"value": null`: a `*lazyNode` whose raw message is nil (Go decodes
    /// `null` into a nil `*json.RawMessage`), which is not the nil node.
    Null,
    /// Anything else.
    Value(&'p Value),
}

impl<'p> Operation<'p> {
    fn from_fields(fields: &'p Map<String, Value>) -> Self {
        let string = |name: &str| fields.get(name).and_then(Value::as_str);
        Operation {
            op: string("op"),
            path: string("path"),
            from: string("from"),
            value: match fields.get("value") {
                None => OpValue::Absent,
                Some(Value::Null) => OpValue::Null,
                Some(v) => OpValue::Value(v),
            },
        }
    }
}

/// The JSON name of a value's type, as Go's `UnmarshalTypeError` says it.
fn go_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `DecodePatch`: Go's `json.Unmarshal` into `[]Operation`, an
/// `Operation` being `map[string]*json.RawMessage`. `null` is a patch of no
/// operations; an element `null` is an operation of no fields, which fails
/// when applied (`Unexpected kind`); anything but an array, or an element
/// that is not an object, is refused. Fields are raw, so any value decodes;
/// unknown fields are ignored. The operations' count is what kube-apiserver
/// holds against [`MAX_OPERATIONS`].
pub fn decode_json_patch(patch: &Value) -> Result<Vec<Operation<'_>>, PatchError> {
    let items = match patch {
        Value::Null => return Ok(Vec::new()),
        Value::Array(items) => items,
        other => {
            return Err(PatchError::Decode {
                found: go_kind(other),
                target: "jsonpatch.Patch",
            });
        }
    };
    items
        .iter()
        .map(|item| match item {
            Value::Object(fields) => Ok(Operation::from_fields(fields)),
            Value::Null => Ok(Operation::default()),
            other => Err(PatchError::Decode {
                found: go_kind(other),
                target: "jsonpatch.Operation",
            }),
        })
        .collect()
}

/// [`decode_json_patch`], then [`apply_operations`]. The caller checks the
/// count against [`MAX_OPERATIONS`] in between if it wants kube-apiserver's
/// 413; this does not.
pub fn apply_json_patch(document: &Value, patch: &Value) -> Result<Value, PatchError> {
    apply_operations(document, &decode_json_patch(patch)?)
}

// ---- numbers and strings as Go writes them ----

/// Whether Go writes a `float64` as an integer that fits an `int64`.
fn integral_int64(x: f64) -> bool {
    x.fract() == 0.0 && (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&x)
}

/// A document scalar after Go writes it and kube-apiserver reads it back:
/// a number Go writes without a fraction or exponent that fits an `int64`
/// is an `int64`, any other a `float64`.
fn kube_number(value: &Value) -> Value {
    match value {
        Value::Number(n) if n.as_i64().is_none() => {
            let x = n.as_f64().unwrap_or(0.0);
            if integral_int64(x) {
                Value::from(x as i64)
            } else {
                Number::from_f64(x).map_or_else(|| value.clone(), Value::Number)
            }
        }
        _ => value.clone(),
    }
}

/// A `float64` as Go's encoder writes it: the shortest digits that read back
/// the same, with an exponent (`1e+21`, `1e-7`) below 1e-6 and from 1e21.
pub fn go_float(x: f64) -> String {
    let abs = x.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let text = format!("{x:e}");
        let (mantissa, exponent) = text.split_once('e').expect("an exponent");
        match exponent.strip_prefix('-') {
            Some(negative) => format!("{mantissa}e-{negative}"),
            None => format!("{mantissa}e+{exponent}"),
        }
    } else {
        x.to_string()
    }
}

/// A number's text. Document numbers are read as kube-apiserver reads Go's
/// text of them ([`kube_number`]) before anything else, so no document
/// `float64` is integral in `int64`'s range: one that is came from the
/// client, who wrote it with a fraction (see the module's documentation).
/// Every other number's text is Go's.
fn number_text(n: &Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    let x = n.as_f64().unwrap_or(0.0);
    let text = go_float(x);
    if integral_int64(x) { text + ".0" } else { text }
}

/// The length of a string as Go's encoder writes it, quotes included:
/// `<`, `>`, `&`, U+2028 and U+2029 escaped, `\b \f \n \r \t` short, other
/// control characters as `\u00XX`.
fn go_string_len(s: &str) -> usize {
    2 + s
        .chars()
        .map(|c| match c {
            '"' | '\\' | '\u{8}' | '\u{c}' | '\n' | '\r' | '\t' => 2,
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => 6,
            c if (c as u32) < 0x20 => 6,
            c => c.len_utf8(),
        })
        .sum::<usize>()
}

// ---- the document: Go's lazyNode tree, in an arena ----

/// A `*lazyNode`: an index into the [`Tree`], `None` the nil pointer, which
/// is what a `null` in a document or inside a value decodes to.
type Slot = Option<usize>;

/// A non-nil `*lazyNode`, whether its raw message has been parsed yet or
/// not: nothing the library does depends on that.
#[derive(Clone, Debug, PartialEq)]
enum Node {
    /// An operation's `"value": null`: a node whose raw message is nil.
    /// It encodes as `null`, but a path through it dereferences the nil
    /// message, and it equals nothing but another such `null`.
    NoRaw,
    /// A string, number or boolean.
    Scalar(Value),
    /// An object; `None` is Go's nil map, what a raw `null` becomes when read
    /// as an object (a `copy` of a [`Node::NoRaw`]). It encodes as `null`,
    /// equals `{}`, and writing to it panics.
    Object(Option<BTreeMap<String, Slot>>),
    /// An array.
    Array(Vec<Slot>),
}

/// Where a node being built goes: an array's element, an object's member.
enum Dest {
    Element(usize, usize),
    Member(usize, String),
}

/// The nodes of one patch's application: the document's, the operations'
/// values', copies. Nothing is freed before the end.
#[derive(Default)]
struct Tree {
    nodes: Vec<Node>,
}

impl Tree {
    fn push(&mut self, node: Node) -> usize {
        self.nodes.push(node);
        self.nodes.len() - 1
    }

    fn put(&mut self, dest: Dest, slot: Slot) {
        match dest {
            Dest::Element(parent, i) => {
                if let Node::Array(items) = &mut self.nodes[parent] {
                    items[i] = slot;
                }
            }
            Dest::Member(parent, key) => {
                if let Node::Object(Some(map)) = &mut self.nodes[parent] {
                    map.insert(key, slot);
                }
            }
        }
    }

    /// A value's nodes. A document's numbers are read as kube-apiserver
    /// reads Go's text of them (`kube`); with `prune`, keys holding `null`
    /// are left out of every object (`pruneNulls`; `null` array elements
    /// stay).
    fn add_value(&mut self, value: &Value, kube: bool, prune: bool) -> Slot {
        let mut root = None;
        let mut work: Vec<(&Value, Option<Dest>)> = vec![(value, None)];
        while let Some((value, dest)) = work.pop() {
            let slot = match value {
                Value::Null => None,
                Value::Array(items) => {
                    let at = self.push(Node::Array(vec![None; items.len()]));
                    work.extend(
                        (items.iter().enumerate()).map(|(i, v)| (v, Some(Dest::Element(at, i)))),
                    );
                    Some(at)
                }
                Value::Object(map) => {
                    let at = self.push(Node::Object(Some(BTreeMap::new())));
                    for (k, v) in map {
                        if !(prune && v.is_null()) {
                            work.push((v, Some(Dest::Member(at, k.clone()))));
                        }
                    }
                    Some(at)
                }
                scalar => Some(self.push(Node::Scalar(if kube {
                    kube_number(scalar)
                } else {
                    scalar.clone()
                }))),
            };
            match dest {
                Some(dest) => self.put(dest, slot),
                None => root = slot,
            }
        }
        root
    }

    /// `op.value()` as a node.
    fn add_op_value(&mut self, value: &OpValue) -> Slot {
        match value {
            OpValue::Absent => None,
            OpValue::Null => Some(self.push(Node::NoRaw)),
            OpValue::Value(v) => self.add_value(v, false, false),
        }
    }

    /// The JSON value kube-apiserver decodes from the text Go writes for a
    /// node. Takes the nodes.
    fn take_value(&mut self, slot: Slot) -> Value {
        enum Step {
            Enter(Slot),
            Array(usize),
            Object(Vec<String>),
        }
        let mut done: Vec<Value> = Vec::new();
        let mut work = vec![Step::Enter(slot)];
        while let Some(step) = work.pop() {
            match step {
                Step::Enter(None) => done.push(Value::Null),
                Step::Enter(Some(at)) => {
                    match std::mem::replace(&mut self.nodes[at], Node::NoRaw) {
                        Node::NoRaw | Node::Object(None) => done.push(Value::Null),
                        Node::Scalar(value) => done.push(value),
                        Node::Array(items) => {
                            work.push(Step::Array(items.len()));
                            work.extend(items.into_iter().rev().map(Step::Enter));
                        }
                        Node::Object(Some(map)) => {
                            let (keys, slots): (Vec<String>, Vec<Slot>) = map.into_iter().unzip();
                            work.push(Step::Object(keys));
                            work.extend(slots.into_iter().rev().map(Step::Enter));
                        }
                    }
                }
                Step::Array(len) => {
                    let items = done.split_off(done.len() - len);
                    done.push(Value::Array(items));
                }
                Step::Object(keys) => {
                    let values = done.split_off(done.len() - keys.len());
                    done.push(Value::Object(keys.into_iter().zip(values).collect()));
                }
            }
        }
        done.pop().expect("one value")
    }

    /// The length of the text `json.Marshal` writes for a node
    /// (`lazyNode.MarshalJSON`), what `deepCopy` counts.
    fn go_len(&self, slot: Slot) -> usize {
        let mut len = 0;
        let mut work = vec![slot];
        while let Some(slot) = work.pop() {
            let Some(at) = slot else {
                len += 4;
                continue;
            };
            len += match &self.nodes[at] {
                Node::NoRaw | Node::Object(None) => 4,
                Node::Scalar(Value::String(s)) => go_string_len(s),
                Node::Scalar(Value::Number(n)) => number_text(n).len(),
                Node::Scalar(Value::Bool(true)) => 4,
                Node::Scalar(_) => 5,
                Node::Object(Some(map)) => {
                    work.extend(map.values());
                    let keys: usize = map.keys().map(|k| go_string_len(k) + 1).sum();
                    keys + 1 + map.len().max(1)
                }
                Node::Array(items) => {
                    work.extend(items);
                    1 + items.len().max(1)
                }
            };
        }
        len
    }

    /// `deepCopy`: the node written by `json.Marshal` and read back as a raw
    /// node, and the text's length. Nulls inside come back nil; a
    /// [`Node::NoRaw`] itself comes back a raw `null`, which reads as a nil
    /// map.
    fn deep_copy(&mut self, slot: Slot) -> (Slot, usize) {
        let Some(at) = slot else { return (None, 0) };
        let len = self.go_len(slot);
        if matches!(self.nodes[at], Node::NoRaw | Node::Object(None)) {
            return (Some(self.push(Node::Object(None))), len);
        }
        // Copy level by level: a container is copied still pointing at the
        // original's children, which are then copied in turn.
        let top = self.push(self.nodes[at].clone());
        let mut work = vec![top];
        while let Some(copy) = work.pop() {
            let originals: Vec<Slot> = match &self.nodes[copy] {
                Node::Array(items) => items.clone(),
                Node::Object(Some(map)) => map.values().copied().collect(),
                _ => continue,
            };
            let copies: Vec<Slot> = originals
                .into_iter()
                .map(|original| {
                    let at = original?;
                    match &self.nodes[at] {
                        Node::NoRaw | Node::Object(None) => None,
                        node => {
                            let node = node.clone();
                            let new = self.push(node);
                            work.push(new);
                            Some(new)
                        }
                    }
                })
                .collect();
            match &mut self.nodes[copy] {
                Node::Array(items) => *items = copies,
                Node::Object(Some(map)) => {
                    for (slot, new) in map.values_mut().zip(copies) {
                        *slot = new;
                    }
                }
                _ => {}
            }
        }
        (Some(top), len)
    }

    /// `lazyNode.equal(o)`, `n` being the document's node and `o` the
    /// operation's value (or part of it), `None` the nil node. Scalars
    /// compare by text (`bytes.Equal` of the compacted raw messages); a nil
    /// on the operation's side, or in the document's array, is dereferenced.
    /// Go walks an object's keys in random order, so where one key differs
    /// and another would panic, kube-apiserver answers either; this walks
    /// them sorted. Otherwise depth first, in Go's order.
    fn equal(&self, n: usize, o: Slot) -> Result<bool, PatchError> {
        enum Check {
            /// `n.equal(o)`.
            Equal(usize, Slot),
            /// An object's key: `(v == nil) != (ov == nil)`, then equal.
            Member(Slot, Slot),
            /// An object's key the other object lacks.
            Missing,
            /// An array's element: `val.equal(o.ary[idx])`.
            Element(Slot, Slot),
        }
        let mut work = vec![Check::Equal(n, o)];
        while let Some(check) = work.pop() {
            let (n, o) = match check {
                Check::Equal(n, o) => (n, o),
                Check::Member(None, None) => continue,
                Check::Member(Some(n), Some(o)) => (n, Some(o)),
                Check::Member(..) | Check::Missing => return Ok(false),
                Check::Element(n, o) => (n.ok_or(PatchError::Panic(NIL_ELEMENT))?, o),
            };
            let o = &self.nodes[o.ok_or(PatchError::Panic(NIL_VALUE))?];
            let same = match (&self.nodes[n], o) {
                // Neither object nor array: raw bytes against raw bytes.
                (Node::NoRaw, o) => matches!(o, Node::NoRaw),
                (Node::Scalar(a), Node::Scalar(b)) => match (a, b) {
                    (Value::Number(a), Value::Number(b)) => number_text(a) == number_text(b),
                    (a, b) => a == b,
                },
                (Node::Scalar(_), _) => false,
                // `o.tryDoc()`: only an object reads as one (an operation's
                // value is never a raw `null`).
                (Node::Object(map), Node::Object(other)) => {
                    let empty = BTreeMap::new();
                    let map = map.as_ref().unwrap_or(&empty);
                    let other = other.as_ref().unwrap_or(&empty);
                    if map.len() != other.len() {
                        return Ok(false);
                    }
                    work.extend(map.iter().rev().map(|(k, v)| match other.get(k) {
                        Some(ov) => Check::Member(*v, *ov),
                        None => Check::Missing,
                    }));
                    true
                }
                (Node::Array(items), Node::Array(other)) => {
                    if items.len() != other.len() {
                        return Ok(false);
                    }
                    work.extend(
                        (items.iter().zip(other).rev()).map(|(v, ov)| Check::Element(*v, *ov)),
                    );
                    true
                }
                (Node::Object(_) | Node::Array(_), _) => false,
            };
            if !same {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

// ---- containers: partialDoc and partialArray ----

/// Go's `strconv.Atoi`: an optional sign and decimal digits, in `int64`'s
/// range (`+1` and `01` are 1).
fn atoi(key: &str) -> Result<i64, PatchError> {
    key.parse()
        .map_err(|_| failed(format!("value was not a proper array index: '{key}'")))
}

fn invalid_index(idx: i64) -> PatchError {
    failed(format!(
        "Unable to access invalid index: {idx}: invalid index referenced"
    ))
}

/// `partialArray.get`'s index (also `set`'s and `remove`'s): negative
/// counts from the end.
fn index(len: usize, key: &str) -> Result<usize, PatchError> {
    let mut idx = atoi(key)?;
    let len = len as i64;
    if idx < 0 {
        if idx < -len {
            return Err(invalid_index(idx));
        }
        idx += len;
    }
    if idx >= len {
        return Err(invalid_index(idx));
    }
    Ok(idx as usize)
}

/// The library's `container` methods, on an object (`partialDoc`, maybe a
/// nil map) or an array (`partialArray`) node.
impl Tree {
    /// `get`: a missing key of an object is nil, not an error.
    fn get(&self, con: usize, key: &str) -> Result<Slot, PatchError> {
        match &self.nodes[con] {
            Node::Object(map) => Ok(map.as_ref().and_then(|m| *m.get(key)?)),
            Node::Array(items) => Ok(items[index(items.len(), key)?]),
            Node::NoRaw | Node::Scalar(_) => unreachable!("not a container"),
        }
    }

    /// `add`: an object's key is set; an array grows at `-` (the end) or an
    /// index up to its length, a negative one counting from the grown
    /// array's end (`-1` appends).
    fn add(&mut self, con: usize, key: String, val: Slot) -> Result<(), PatchError> {
        match &mut self.nodes[con] {
            Node::Object(map) => {
                map.as_mut()
                    .ok_or(PatchError::Panic(NIL_MAP))?
                    .insert(key, val);
            }
            Node::Array(items) => {
                if key == "-" {
                    items.push(val);
                    return Ok(());
                }
                let mut idx = atoi(&key)?;
                let size = items.len() as i64 + 1;
                if idx >= size {
                    return Err(invalid_index(idx));
                }
                if idx < 0 {
                    if idx < -size {
                        return Err(invalid_index(idx));
                    }
                    idx += size;
                }
                items.insert(idx as usize, val);
            }
            Node::NoRaw | Node::Scalar(_) => unreachable!("not a container"),
        }
        Ok(())
    }

    /// `set`, after a `get` that succeeded.
    fn set(&mut self, con: usize, key: String, val: Slot) -> Result<(), PatchError> {
        match &mut self.nodes[con] {
            Node::Object(map) => {
                map.as_mut()
                    .ok_or(PatchError::Panic(NIL_MAP))?
                    .insert(key, val);
            }
            Node::Array(items) => {
                let idx = index(items.len(), &key)?;
                items[idx] = val;
            }
            Node::NoRaw | Node::Scalar(_) => unreachable!("not a container"),
        }
        Ok(())
    }

    /// `get` then `remove`, as `move` does: the removed node. A missing key
    /// fails (a key holding `null` does not).
    fn take(&mut self, con: usize, key: &str) -> Result<Slot, PatchError> {
        match &mut self.nodes[con] {
            Node::Object(map) => map
                .as_mut()
                .and_then(|m| m.remove(key))
                .ok_or_else(|| failed(format!("Unable to remove nonexistent key: {key}"))),
            Node::Array(items) => {
                let idx = index(items.len(), key)?;
                Ok(items.remove(idx))
            }
            Node::NoRaw | Node::Scalar(_) => unreachable!("not a container"),
        }
    }

    /// `findObject`: the container holding the path's last token, and that
    /// token. The path is split at every `/` and its first piece ignored,
    /// so `""` finds nothing and `a/b` is `/b`. Walking through a missing
    /// key, a `null`, a scalar or a bad index finds nothing; walking through
    /// an operation's `null` value ([`Node::NoRaw`]) panics
    /// (`isArray(*next.raw)`).
    fn find_object(&self, root: usize, path: &str) -> Result<Option<(usize, String)>, PatchError> {
        let tokens: Vec<&str> = path.split('/').collect();
        let Some((last, middle)) = tokens.split_last() else {
            return Ok(None);
        };
        if middle.is_empty() {
            return Ok(None);
        }
        let mut doc = root;
        for token in &middle[1..] {
            let Ok(Some(next)) = self.get(doc, &decode_key(token)) else {
                return Ok(None);
            };
            match self.nodes[next] {
                Node::NoRaw => return Err(PatchError::Panic(NIL_RAW)),
                Node::Scalar(_) => return Ok(None),
                Node::Object(_) | Node::Array(_) => doc = next,
            }
        }
        Ok(Some((doc, decode_key(last))))
    }
}

/// `decodePatchKey`: `~1` is `/`, then `~0` is `~`, as one left-to-right
/// pass (`~01` is `~1`); any other `~` stays.
fn decode_key(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

fn missing(op: &str, path: &str) -> PatchError {
    failed(format!(
        "{op} operation does not apply: doc is missing path: \"{path}\": missing value"
    ))
}

fn path_of<'p>(op: &Operation<'p>, kind: &str) -> Result<&'p str, PatchError> {
    op.path
        .ok_or_else(|| failed(format!("{kind} operation failed to decode path")))
}

fn from_of<'p>(op: &Operation<'p>, kind: &str) -> Result<&'p str, PatchError> {
    op.from
        .ok_or_else(|| failed(format!("{kind} operation failed to decode from")))
}

// ---- the operations ----

/// A document being patched: its nodes, its root (an object or an array),
/// and what `copy` has copied so far.
struct Doc {
    tree: Tree,
    root: usize,
    copied: usize,
}

/// `Patch.Apply`: the document read as a `partialArray` when it is an array
/// and as a `partialDoc` otherwise (`null` is a nil map: it encodes back as
/// `null` and panics when written to; a string, number or boolean fails),
/// then each operation in turn; the first that fails fails the patch.
pub fn apply_operations(
    document: &Value,
    operations: &[Operation<'_>],
) -> Result<Value, PatchError> {
    let mut tree = Tree::default();
    let root = match document {
        Value::Null => tree.push(Node::Object(None)),
        Value::Object(_) | Value::Array(_) => {
            tree.add_value(document, true, false).expect("not null")
        }
        other => {
            return Err(failed(format!(
                "json: cannot unmarshal {} into Go value of type jsonpatch.partialDoc",
                go_kind(other)
            )));
        }
    };
    let mut doc = Doc {
        tree,
        root,
        copied: 0,
    };
    for op in operations {
        match op.op {
            Some("add") => doc.add(op),
            Some("remove") => doc.remove(op),
            Some("replace") => doc.replace(op),
            Some("move") => doc.move_(op),
            Some("test") => doc.test(op),
            Some("copy") => doc.copy(op),
            kind => Err(failed(format!(
                "Unexpected kind: {}",
                kind.unwrap_or("unknown")
            ))),
        }?;
    }
    Ok(doc.tree.take_value(Some(doc.root)))
}

impl Doc {
    fn find(&self, op: &str, path: &str) -> Result<(usize, String), PatchError> {
        self.tree
            .find_object(self.root, path)?
            .ok_or_else(|| missing(op, path))
    }

    /// `Patch.add`. Not at the root (`""` finds no container). Without a
    /// `value` it adds `null`.
    fn add(&mut self, op: &Operation) -> Result<(), PatchError> {
        let (con, key) = self.find("add", path_of(op, "add")?)?;
        let val = self.tree.add_op_value(&op.value);
        self.tree.add(con, key, val)
    }

    /// `Patch.remove`. A missing key or index fails; not at the root.
    fn remove(&mut self, op: &Operation) -> Result<(), PatchError> {
        let (con, key) = self.find("remove", path_of(op, "remove")?)?;
        self.tree.take(con, &key).map(drop)
    }

    /// `Patch.replace`. At the root an object or array value replaces the
    /// document; any other value, `null` included, changes nothing and does
    /// not fail (the library wraps a nil error); no value panics. Elsewhere,
    /// an object's missing key is added (only an array's index is checked).
    fn replace(&mut self, op: &Operation) -> Result<(), PatchError> {
        let path = path_of(op, "replace")?;
        if path.is_empty() {
            match op.value {
                OpValue::Absent => return Err(PatchError::Panic(NIL_VALUE)),
                OpValue::Value(value @ (Value::Object(_) | Value::Array(_))) => {
                    self.root = self.tree.add_value(value, false, false).expect("not null");
                }
                OpValue::Null | OpValue::Value(_) => {}
            }
            return Ok(());
        }
        let (con, key) = self.find("replace", path)?;
        self.tree.get(con, &key)?;
        let val = self.tree.add_op_value(&op.value);
        self.tree.set(con, key, val)
    }

    /// `Patch.move`: removed from `from`, then added at `path` in the
    /// document without it (so into itself fails, and an array index counts
    /// without the moved element). A key holding `null` moves; a missing one
    /// fails.
    fn move_(&mut self, op: &Operation) -> Result<(), PatchError> {
        let (con, key) = self.find("move", from_of(op, "move")?)?;
        let val = self.tree.take(con, &key)?;
        let (con, key) = self.find("move", path_of(op, "move")?)?;
        self.tree.add(con, key, val)
    }

    /// `Patch.copy`: a deep copy (see [`Tree::deep_copy`]); a missing key of
    /// an object copies `null`. The copies' text lengths add up against
    /// [`COPY_SIZE_LIMIT`].
    fn copy(&mut self, op: &Operation) -> Result<(), PatchError> {
        let (con, key) = self.find("copy", from_of(op, "copy")?)?;
        let val = self.tree.get(con, &key)?;
        let (con, key) = self.find("copy", path_of(op, "copy")?)?;
        let (val, size) = self.tree.deep_copy(val);
        self.copied += size;
        if self.copied > COPY_SIZE_LIMIT {
            return Err(failed(format!(
                "Unable to complete the copy, the accumulated size increase of copy is {}, exceeding the limit {COPY_SIZE_LIMIT}",
                self.copied
            )));
        }
        self.tree.add(con, key, val)
    }

    /// `Patch.test`, by [`Tree::equal`]. At the root the whole document is
    /// compared. A missing key, or one holding `null`, passes against
    /// `"value": null`; without a `value` it panics, where a present key
    /// fails.
    fn test(&mut self, op: &Operation) -> Result<(), PatchError> {
        let path = path_of(op, "test")?;
        let test_failed = || failed(format!("testing value {path} failed: test failed"));
        let val = if path.is_empty() {
            self.root
        } else {
            let (con, key) = self.find("test", path)?;
            match (self.tree.get(con, &key)?, op.value) {
                (None, OpValue::Absent) => return Err(PatchError::Panic(NIL_VALUE)),
                (None, OpValue::Null) => return Ok(()),
                (None, OpValue::Value(_)) | (Some(_), OpValue::Absent) => {
                    return Err(test_failed());
                }
                (Some(val), _) => val,
            }
        };
        let value = self.tree.add_op_value(&op.value);
        if self.tree.equal(val, value)? {
            Ok(())
        } else {
            Err(test_failed())
        }
    }
}

// ---- JSON Merge Patch ----

/// `MergePatch` (`doMergePatch`): a `null` document or patch is refused, a
/// string, number or boolean patch too; an array patch is the result
/// whatever the document (nulls pruned from the objects in it); an object
/// patch on anything but an object is the result with its nulls pruned;
/// else the objects merge (`mergeDocs`): a `null` removes its key; a value
/// for a key that is missing or `null` is set with its nulls pruned; objects
/// merge; a value replacing a non-object has its nulls pruned, one replacing
/// an object does not (`merge`: an array of objects with nulls replaces an
/// object as it is). Document numbers come out as kube-apiserver reads Go's
/// text of them (see the module's documentation); the patch's as they are.
pub fn apply_merge_patch(document: &Value, patch: &Value) -> Result<Value, PatchError> {
    if document.is_null() {
        return Err(PatchError::InvalidDocument);
    }
    let mut tree = Tree::default();
    let root = match (document, patch) {
        (Value::Object(_), Value::Object(patch)) => {
            let root = tree.add_value(document, true, false);
            let mut work = vec![(root.expect("an object"), patch)];
            while let Some((doc, patch)) = work.pop() {
                for (key, value) in patch {
                    let Node::Object(Some(map)) = &mut tree.nodes[doc] else {
                        unreachable!("merged objects are objects")
                    };
                    if value.is_null() {
                        map.remove(key);
                        continue;
                    }
                    let current = map.get(key).copied().flatten();
                    let merged = match (current, value) {
                        (Some(cur), Value::Object(value))
                            if matches!(tree.nodes[cur], Node::Object(_)) =>
                        {
                            work.push((cur, value));
                            continue;
                        }
                        (Some(cur), value) if matches!(tree.nodes[cur], Node::Object(_)) => {
                            tree.add_value(value, false, false)
                        }
                        _ => tree.add_value(value, false, true),
                    };
                    tree.put(Dest::Member(doc, key.clone()), merged);
                }
            }
            root
        }
        (_, Value::Object(_) | Value::Array(_)) => tree.add_value(patch, false, true),
        _ => return Err(PatchError::InvalidMergePatch),
    };
    Ok(tree.take_value(root))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn patch(document: Value, ops: Value) -> Result<Value, PatchError> {
        apply_json_patch(&document, &ops)
    }

    fn ok(document: Value, ops: Value) -> Value {
        patch(document, ops).expect("the patch applies")
    }

    fn fails(document: Value, ops: Value) {
        match patch(document, ops) {
            Err(PatchError::Failed(_)) => {}
            other => panic!("expected a failure, got {other:?}"),
        }
    }

    fn panics(document: Value, ops: Value) {
        match patch(document, ops) {
            Err(PatchError::Panic(_)) => {}
            other => panic!("expected a Go panic, got {other:?}"),
        }
    }

    // -- DecodePatch (json.Unmarshal into []Operation; Operation.Kind, Path) --

    #[test]
    fn decode_accepts_what_go_unmarshals_into_a_patch() {
        // json.Unmarshal of null into a slice: no operations.
        assert_eq!(decode_json_patch(&Value::Null).unwrap().len(), 0);
        assert_eq!(ok(json!({"a": 1.5}), Value::Null), json!({"a": 1.5}));
        assert_eq!(
            decode_json_patch(&json!({"op": "add"})),
            Err(PatchError::Decode {
                found: "object",
                target: "jsonpatch.Patch"
            })
        );
        assert_eq!(
            decode_json_patch(&json!([{"op": "add"}, 1]))
                .unwrap_err()
                .to_string(),
            "json: cannot unmarshal number into Go value of type jsonpatch.Operation"
        );
        // A null element is a nil map: it decodes, and fails as an unknown kind.
        assert_eq!(decode_json_patch(&json!([null, {}])).unwrap().len(), 2);
        fails(json!({}), json!([null]));
        fails(json!({}), json!([{"op": "ADD", "path": "/a", "value": 1}]));
        fails(json!({}), json!([{"op": 1, "path": "/a", "value": 1}]));
        // Unknown fields are ignored; a path that is not a string fails.
        assert_eq!(
            ok(
                json!({}),
                json!([{"op": "add", "path": "/a", "value": 1, "x": 2}])
            ),
            json!({"a": 1})
        );
        fails(json!({}), json!([{"op": "add", "path": 1, "value": 1}]));
        fails(json!({}), json!([{"op": "add", "path": null, "value": 1}]));
    }

    // -- Patch.Apply (ApplyIndent): the document --

    #[test]
    fn documents_are_read_as_partial_doc_or_array() {
        assert_eq!(
            ok(json!([1]), json!([{"op": "add", "path": "/0", "value": 0}])),
            json!([0, 1])
        );
        fails(json!("x"), json!([]));
        fails(json!(1), json!([]));
        // null is a nil map: it encodes back as null, reading it finds nothing,
        // and writing to it panics.
        assert_eq!(ok(Value::Null, json!([])), Value::Null);
        fails(Value::Null, json!([{"op": "remove", "path": "/a"}]));
        panics(
            Value::Null,
            json!([{"op": "add", "path": "/a", "value": 1}]),
        );
        assert_eq!(
            ok(
                Value::Null,
                json!([{"op": "test", "path": "", "value": {}}])
            ),
            Value::Null
        );
    }

    #[test]
    fn document_floats_come_back_as_kube_apiserver_reads_gos_text() {
        // Go writes float64 1 as `1`, which kube-apiserver reads as an int64;
        // the patch's 2.0 was written `2.0` by the client and stays a float.
        assert_eq!(
            ok(
                json!({"a": 1.0, "b": 1.5, "c": 1e19, "d": -0.0}),
                json!([{"op": "add", "path": "/e", "value": 2.0}])
            ),
            json!({"a": 1, "b": 1.5, "c": 1e19, "d": 0, "e": 2.0})
        );
        let out = ok(json!({"a": 1.0}), json!([]));
        assert!(out["a"].is_i64());
    }

    // -- findObject and decodePatchKey --

    #[test]
    fn paths_split_at_every_slash_and_ignore_the_first_piece() {
        // "" has no container: add, remove, copy and move cannot use the root.
        fails(json!({}), json!([{"op": "add", "path": "", "value": {}}]));
        fails(json!({"a": 1}), json!([{"op": "remove", "path": ""}]));
        // No leading slash: the first piece is ignored.
        assert_eq!(
            ok(json!({}), json!([{"op": "add", "path": "x/b", "value": 1}])),
            json!({"b": 1})
        );
        // "/" is the key "".
        assert_eq!(
            ok(json!({}), json!([{"op": "add", "path": "/", "value": 1}])),
            json!({"": 1})
        );
        // ~1 then ~0, left to right; an unknown escape stays.
        assert_eq!(
            ok(
                json!({}),
                json!([
                    {"op": "add", "path": "/a~1b", "value": 1},
                    {"op": "add", "path": "/~01", "value": 2},
                    {"op": "add", "path": "/~2", "value": 3},
                ])
            ),
            json!({"a/b": 1, "~1": 2, "~2": 3})
        );
        // Through a missing key, a null or a scalar: nothing found.
        fails(
            json!({}),
            json!([{"op": "add", "path": "/a/b", "value": 1}]),
        );
        fails(
            json!({"a": null}),
            json!([{"op": "add", "path": "/a/b", "value": 1}]),
        );
        fails(
            json!({"a": "s"}),
            json!([{"op": "add", "path": "/a/b", "value": 1}]),
        );
        // Negative indices walk too.
        assert_eq!(
            ok(
                json!({"a": [{}, {}]}),
                json!([{"op": "add", "path": "/a/-1/x", "value": 1}])
            ),
            json!({"a": [{}, {"x": 1}]})
        );
    }

    #[test]
    fn a_path_through_an_operations_null_value_panics() {
        // isArray(*next.raw) with a nil raw message.
        panics(
            json!({}),
            json!([
                {"op": "add", "path": "/a", "value": null},
                {"op": "add", "path": "/a/b", "value": 1},
            ]),
        );
        // Without a value the node is nil, and the walk just fails.
        fails(
            json!({}),
            json!([
                {"op": "add", "path": "/a"},
                {"op": "add", "path": "/a/b", "value": 1},
            ]),
        );
    }

    // -- add (partialDoc.add, partialArray.add) --

    #[test]
    fn add() {
        assert_eq!(
            ok(
                json!({"a": 1}),
                json!([{"op": "add", "path": "/a", "value": [2]}])
            ),
            json!({"a": [2]})
        );
        let arr = || json!({"a": [1, 2]});
        let add_at = |at: &str| {
            patch(
                arr(),
                json!([{"op": "add", "path": format!("/a/{at}"), "value": 9}]),
            )
        };
        assert_eq!(add_at("0").unwrap(), json!({"a": [9, 1, 2]}));
        assert_eq!(add_at("2").unwrap(), json!({"a": [1, 2, 9]}));
        assert_eq!(add_at("-").unwrap(), json!({"a": [1, 2, 9]}));
        // strconv.Atoi: sign and leading zeros.
        assert_eq!(add_at("+01").unwrap(), json!({"a": [1, 9, 2]}));
        // Negative counts from the grown array: -1 appends, -3 prepends.
        assert_eq!(add_at("-1").unwrap(), json!({"a": [1, 2, 9]}));
        assert_eq!(add_at("-3").unwrap(), json!({"a": [9, 1, 2]}));
        for bad in ["3", "-4", "x", "", "1.0", "99999999999999999999"] {
            assert!(matches!(add_at(bad), Err(PatchError::Failed(_))), "{bad}");
        }
        // No value: null.
        assert_eq!(
            ok(json!({}), json!([{"op": "add", "path": "/a"}])),
            json!({"a": null})
        );
    }

    // -- remove (Patch.remove, partialDoc.remove, partialArray.remove) --

    #[test]
    fn remove() {
        assert_eq!(
            ok(
                json!({"a": 1, "b": null}),
                json!([{"op": "remove", "path": "/b"}])
            ),
            json!({"a": 1})
        );
        fails(json!({"a": 1}), json!([{"op": "remove", "path": "/b"}]));
        assert_eq!(
            ok(
                json!({"a": [1, 2, 3]}),
                json!([{"op": "remove", "path": "/a/-1"}])
            ),
            json!({"a": [1, 2]})
        );
        for bad in ["3", "-4", "-"] {
            fails(
                json!({"a": [1, 2, 3]}),
                json!([{"op": "remove", "path": format!("/a/{bad}")}]),
            );
        }
    }

    // -- replace (Patch.replace, partialDoc.set, partialArray.set) --

    #[test]
    fn replace_adds_a_missing_object_key() {
        // partialDoc.get never fails, so v4 replaces what is not there.
        assert_eq!(
            ok(
                json!({"a": 1}),
                json!([{"op": "replace", "path": "/b", "value": 2}])
            ),
            json!({"a": 1, "b": 2})
        );
        assert_eq!(
            ok(
                json!({"a": [1, 2]}),
                json!([{"op": "replace", "path": "/a/-2", "value": 0}])
            ),
            json!({"a": [0, 2]})
        );
        for bad in ["2", "-3", "-"] {
            fails(
                json!({"a": [1, 2]}),
                json!([{"op": "replace", "path": format!("/a/{bad}"), "value": 0}]),
            );
        }
        // Into a copied null (a nil map): the write panics.
        panics(
            json!({}),
            json!([
                {"op": "add", "path": "/a", "value": null},
                {"op": "copy", "from": "/a", "path": "/b"},
                {"op": "replace", "path": "/b/c", "value": 1},
            ]),
        );
    }

    #[test]
    fn replace_at_the_root() {
        assert_eq!(
            ok(
                json!({"a": 1}),
                json!([{"op": "replace", "path": "", "value": [1]}])
            ),
            json!([1])
        );
        // A scalar or null: the library wraps a nil error, so nothing happens.
        for value in [json!(5), json!("s"), Value::Null] {
            assert_eq!(
                ok(
                    json!({"a": 1}),
                    json!([{"op": "replace", "path": "", "value": value}])
                ),
                json!({"a": 1})
            );
        }
        panics(json!({"a": 1}), json!([{"op": "replace", "path": ""}]));
    }

    // -- move (Patch.move) --

    #[test]
    fn move_() {
        assert_eq!(
            ok(
                json!({"a": {"b": 1}}),
                json!([{"op": "move", "from": "/a/b", "path": "/c"}])
            ),
            json!({"a": {}, "c": 1})
        );
        // A key holding null moves; a missing one does not.
        assert_eq!(
            ok(
                json!({"a": null}),
                json!([{"op": "move", "from": "/a", "path": "/b"}])
            ),
            json!({"b": null})
        );
        fails(
            json!({}),
            json!([{"op": "move", "from": "/a", "path": "/b"}]),
        );
        // Into itself: removed first, so the destination is gone.
        fails(
            json!({"a": {}}),
            json!([{"op": "move", "from": "/a", "path": "/a/b"}]),
        );
        // The destination index counts without the moved element.
        assert_eq!(
            ok(
                json!([1, 2, 3]),
                json!([{"op": "move", "from": "/0", "path": "/2"}])
            ),
            json!([2, 3, 1])
        );
        fails(
            json!([1, 2, 3]),
            json!([{"op": "move", "from": "/0", "path": "/3"}]),
        );
        fails(
            json!({"a": 1}),
            json!([{"op": "move", "from": "", "path": "/b"}]),
        );
    }

    // -- copy (Patch.copy, deepCopy, AccumulatedCopySizeLimit) --

    #[test]
    fn copy_of_a_missing_key_copies_null() {
        assert_eq!(
            ok(
                json!({"a": [1]}),
                json!([
                    {"op": "copy", "from": "/a", "path": "/b"},
                    {"op": "copy", "from": "/x", "path": "/c"},
                    {"op": "add", "path": "/b/-", "value": 2},
                ])
            ),
            json!({"a": [1], "b": [1, 2], "c": null})
        );
        fails(
            json!({"a": [1]}),
            json!([{"op": "copy", "from": "/a/1", "path": "/b"}]),
        );
    }

    #[test]
    fn a_copied_null_value_is_a_nil_map() {
        // deepCopy writes the nil raw message as `null`, and a raw `null` is
        // read as a nil map: it tests equal to {} and not to null.
        let setup = json!([
            {"op": "add", "path": "/a", "value": null},
            {"op": "copy", "from": "/a", "path": "/b"},
        ]);
        let with = |op: Value| {
            let mut ops = setup.as_array().unwrap().clone();
            ops.push(op);
            patch(json!({}), Value::Array(ops))
        };
        assert_eq!(
            with(json!({"op": "test", "path": "/b", "value": {}})),
            Ok(json!({"a": null, "b": null}))
        );
        assert!(with(json!({"op": "test", "path": "/b", "value": null})).is_err());
        // The original tests equal to null only.
        assert!(with(json!({"op": "test", "path": "/a", "value": null})).is_ok());
        assert!(with(json!({"op": "test", "path": "/a", "value": {}})).is_err());
    }

    #[test]
    fn copies_count_against_the_limit() {
        // Each copy of the 1 MiB string counts 2 + 1048576 bytes.
        let big = "x".repeat(1 << 20);
        let copies = |n: usize| {
            let ops: Vec<Value> = (0..n)
                .map(|i| json!({"op": "copy", "from": "/a", "path": format!("/c{i}")}))
                .collect();
            patch(json!({ "a": big }), Value::Array(ops))
        };
        assert!(copies(2).is_ok());
        assert!(matches!(copies(3), Err(PatchError::Failed(_))));
        // Go's text: `<` is six bytes.
        assert_eq!(tree_len(&json!({"a<": [1.5, null, true]}), true), 27);
        // The client wrote `2.0`.
        assert_eq!(tree_len(&json!(2.0), false), 3);
    }

    fn tree_len(value: &Value, document: bool) -> usize {
        let mut tree = Tree::default();
        let slot = tree.add_value(value, document, false);
        tree.go_len(slot)
    }

    // -- test (Patch.test, lazyNode.equal) --

    #[test]
    fn test_compares_numbers_by_text() {
        let t = |doc: Value, value: Value| {
            patch(doc, json!([{"op": "test", "path": "/a", "value": value}])).is_ok()
        };
        assert!(t(json!({"a": 1}), json!(1)));
        // The client wrote 1.0 (it decoded to a float), Go wrote `1`.
        assert!(!t(json!({"a": 1}), json!(1.0)));
        // A stored float64 1 is written `1`.
        assert!(t(json!({"a": 1.0}), json!(1)));
        assert!(!t(json!({"a": 1.0}), json!(1.0)));
        assert!(t(json!({"a": 1.5}), json!(1.5)));
        assert!(t(json!({"a": [1, {"b": "x"}]}), json!([1, {"b": "x"}])));
        assert!(!t(json!({"a": [1, {"b": "x"}]}), json!([1, {"b": "y"}])));
        assert!(!t(json!({"a": "1"}), json!(1)));
        assert!(!t(json!({"a": {}}), json!([])));
        // Two values the client wrote alike compare alike.
        assert!(
            patch(
                json!({}),
                json!([
                    {"op": "add", "path": "/a", "value": 2.0},
                    {"op": "test", "path": "/a", "value": 2.0},
                ])
            )
            .is_ok()
        );
    }

    #[test]
    fn test_of_null_and_missing() {
        let t = |doc: Value, op: Value| patch(doc, json!([op]));
        // A missing key is nil, as a null is: both pass against null.
        assert!(
            t(
                json!({}),
                json!({"op": "test", "path": "/a", "value": null})
            )
            .is_ok()
        );
        assert!(
            t(
                json!({"a": null}),
                json!({"op": "test", "path": "/a", "value": null})
            )
            .is_ok()
        );
        assert!(t(json!({}), json!({"op": "test", "path": "/a", "value": 1})).is_err());
        // Without a value: `op.value().raw` on a nil node.
        panics(json!({}), json!([{"op": "test", "path": "/a"}]));
        fails(json!({"a": 1}), json!([{"op": "test", "path": "/a"}]));
        panics(json!({"a": 1}), json!([{"op": "test", "path": ""}]));
        // A null added by a value of null is no nil node: it fails against a
        // null inside an object.
        fails(
            json!({"a": {}}),
            json!([
                {"op": "add", "path": "/a/b", "value": null},
                {"op": "test", "path": "/a", "value": {"b": null}},
            ]),
        );
        assert!(
            t(
                json!({"a": {"b": null}}),
                json!({"op": "test", "path": "/a", "value": {"b": null}})
            )
            .is_ok()
        );
        // Out of range: get fails.
        fails(
            json!({"a": []}),
            json!([{"op": "test", "path": "/a/0", "value": null}]),
        );
    }

    #[test]
    fn test_of_arrays_holding_null_panics() {
        // partialArray elements are compared without a nil check.
        panics(
            json!({"a": [null]}),
            json!([{"op": "test", "path": "/a", "value": [null]}]),
        );
        panics(
            json!({"a": [1]}),
            json!([{"op": "test", "path": "/a", "value": [null]}]),
        );
        // Unless the lengths differ, or an earlier element does.
        fails(
            json!({"a": [null]}),
            json!([{"op": "test", "path": "/a", "value": [null, 1]}]),
        );
        fails(
            json!({"a": [1, null]}),
            json!([{"op": "test", "path": "/a", "value": [2, null]}]),
        );
    }

    #[test]
    fn test_at_the_root() {
        assert!(
            patch(
                json!({"a": [1]}),
                json!([{"op": "test", "path": "", "value": {"a": [1]}}])
            )
            .is_ok()
        );
        fails(
            json!({"a": 1}),
            json!([{"op": "test", "path": "", "value": {"a": 2}}]),
        );
        fails(
            json!({"a": 1}),
            json!([{"op": "test", "path": "", "value": null}]),
        );
    }

    /// Bodies nest up to 10000 deep: nothing here recurses (the test thread
    /// has 2 MiB of stack, as a tokio worker). serde_json's own `==`,
    /// `clone` and, for objects, drop do recurse, so the deep values are
    /// checked by walking and then leaked.
    #[test]
    fn deep_values_do_not_recurse() {
        const DEPTH: usize = crate::wire::json::MAX_DEPTH;
        let arrays = || {
            let mut v = json!(1);
            for _ in 0..DEPTH {
                v = Value::Array(vec![v]);
            }
            v
        };
        let objects = |leaf: Value| {
            let mut v = leaf;
            for _ in 0..DEPTH {
                v = Value::Object(Map::from_iter([("a".to_string(), v)]));
            }
            v
        };
        let depth_of = |mut v: &Value| {
            let mut depth = 0;
            while let Some(inner) = v.get(0).or_else(|| v.get("a")) {
                (v, depth) = (inner, depth + 1);
            }
            depth
        };
        // Not `json!`, which would pass the deep values through `to_value`.
        let object = |members: Vec<(&str, Value)>| {
            Value::Object(
                members
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect(),
            )
        };
        let document = object(vec![("a", arrays()), ("o", objects(json!({"x": 1.0})))]);
        let ops = Value::Array(vec![
            object(vec![
                ("op", json!("test")),
                ("path", json!("/a")),
                ("value", arrays()),
            ]),
            json!({"op": "copy", "from": "/a", "path": "/b"}),
            object(vec![
                ("op", json!("add")),
                ("path", json!("/c")),
                ("value", arrays()),
            ]),
            object(vec![
                ("op", json!("test")),
                ("path", json!("/o")),
                ("value", objects(json!({"x": 1}))),
            ]),
        ]);
        let out = apply_json_patch(&document, &ops).unwrap();
        assert_eq!(
            [
                depth_of(&out["a"]),
                depth_of(&out["b"]),
                depth_of(&out["c"])
            ],
            [DEPTH; 3]
        );
        let merge = object(vec![("o", objects(json!({"y": null, "z": [{"w": null}]})))]);
        let merged = apply_merge_patch(&document, &merge).unwrap();
        let mut leaf = &merged["o"];
        while let Some(inner) = leaf.get("a") {
            leaf = inner;
        }
        assert_eq!(leaf.to_string(), r#"{"x":1,"z":[{}]}"#);
        std::mem::forget((document, ops, out, merge, merged));
    }

    #[test]
    fn float_text_is_gos() {
        assert_eq!(go_float(1e21), "1e+21");
        assert_eq!(go_float(1.5e-7), "1.5e-7");
        assert_eq!(go_float(1e-10), "1e-10");
        assert_eq!(go_float(1e20), "100000000000000000000");
        assert_eq!(go_float(0.000001), "0.000001");
        assert_eq!(go_float(-0.0), "-0");
        assert_eq!(
            go_string_len("a\"\u{1}\n<é\u{2028}"),
            2 + 1 + 2 + 6 + 2 + 6 + 2 + 6
        );
    }

    // -- MergePatch (doMergePatch, mergeDocs, merge, pruneNulls) --

    fn merge(doc: Value, patch: Value) -> Result<Value, PatchError> {
        apply_merge_patch(&doc, &patch)
    }

    #[test]
    fn merge_objects() {
        assert_eq!(
            merge(
                json!({"a": 1, "b": {"c": 2, "d": 3}, "e": [1]}),
                json!({"a": null, "b": {"c": null, "x": 1}, "e": {"f": null}, "n": {"m": null, "o": [null, {"p": null}]}})
            ),
            Ok(json!({"b": {"d": 3, "x": 1}, "e": {}, "n": {"o": [null, {}]}}))
        );
        // Removing what is not there is fine.
        assert_eq!(merge(json!({}), json!({"a": null})), Ok(json!({})));
        // A null key counts as missing: its new value is pruned.
        assert_eq!(
            merge(json!({"a": null}), json!({"a": {"b": null}})),
            Ok(json!({"a": {}}))
        );
    }

    #[test]
    fn merge_prunes_a_value_replacing_a_non_object_only() {
        // merge(): an object current value returns the non-object patch as is.
        assert_eq!(
            merge(json!({"a": {}}), json!({"a": [{"b": null}]})),
            Ok(json!({"a": [{"b": null}]}))
        );
        assert_eq!(
            merge(json!({"a": 1}), json!({"a": [{"b": null}]})),
            Ok(json!({"a": [{}]}))
        );
        assert_eq!(
            merge(json!({"a": [1]}), json!({"a": {"b": null, "c": 1}})),
            Ok(json!({"a": {"c": 1}}))
        );
    }

    #[test]
    fn merge_patches_that_are_not_objects() {
        assert_eq!(
            merge(json!({"a": 1}), Value::Null),
            Err(PatchError::InvalidMergePatch)
        );
        for scalar in [json!(1), json!("s"), json!(true)] {
            assert_eq!(
                merge(json!({"a": 1}), scalar),
                Err(PatchError::InvalidMergePatch)
            );
        }
        // An array is the result, whatever the document.
        assert_eq!(
            merge(json!({"a": 1}), json!([{"b": null}, null])),
            Ok(json!([{}, null]))
        );
        assert_eq!(merge(json!("s"), json!([1])), Ok(json!([1])));
    }

    #[test]
    fn merge_documents_that_are_not_objects() {
        assert_eq!(
            merge(Value::Null, json!({})),
            Err(PatchError::InvalidDocument)
        );
        assert_eq!(
            merge(Value::Null, Value::Null),
            Err(PatchError::InvalidDocument)
        );
        assert_eq!(
            merge(json!(1), Value::Null),
            Err(PatchError::InvalidMergePatch)
        );
        // The patch, pruned, is the result.
        assert_eq!(
            merge(json!([1]), json!({"a": null, "b": {"c": null}})),
            Ok(json!({"b": {}}))
        );
        assert_eq!(
            merge(json!(1), json!(2)),
            Err(PatchError::InvalidMergePatch)
        );
    }

    #[test]
    fn merge_numbers_round_trip_through_gos_text() {
        let out = merge(json!({"a": 1.0, "b": 2.5}), json!({"c": 3.0})).unwrap();
        assert_eq!(out, json!({"a": 1, "b": 2.5, "c": 3.0}));
        assert!(out["a"].is_i64() && out["c"].is_f64());
    }

    // -- never a Rust panic --

    fn arb_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-3i64..4).prop_map(Value::from),
            prop_oneof![Just(1.0), Just(0.5), Just(-0.0), Just(1e21)].prop_map(|f: f64| json!(f)),
            "[ab<]{0,2}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map("[ab]", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn arb_op() -> impl Strategy<Value = Value> {
        let path = proptest::collection::vec(
            prop_oneof![
                Just("a".to_string()),
                Just("b".to_string()),
                Just("0".to_string()),
                Just("1".to_string()),
                Just("-".to_string()),
                Just("-1".to_string()),
                Just("~1".to_string()),
            ],
            0..4,
        )
        .prop_map(|tokens| tokens.iter().map(|t| format!("/{t}")).collect::<String>());
        (
            prop_oneof![
                Just(json!("add")),
                Just(json!("remove")),
                Just(json!("replace")),
                Just(json!("move")),
                Just(json!("copy")),
                Just(json!("test")),
                Just(json!(1)),
            ],
            path.clone(),
            proptest::option::of(path),
            proptest::option::of(arb_value()),
        )
            .prop_map(|(op, path, from, value)| {
                let mut o = json!({"op": op, "path": path});
                if let Some(from) = from {
                    o["from"] = json!(from);
                }
                if let Some(value) = value {
                    o["value"] = value;
                }
                o
            })
    }

    fn arb_object(leaf: impl Strategy<Value = Value> + 'static) -> impl Strategy<Value = Value> {
        let object =
            |m: std::collections::BTreeMap<String, Value>| Value::Object(m.into_iter().collect());
        let value = leaf.prop_recursive(3, 16, 3, move |inner| {
            proptest::collection::btree_map("[abc]", inner, 0..3).prop_map(object)
        });
        proptest::collection::btree_map("[abc]", value, 0..4).prop_map(object)
    }

    proptest! {
        #[test]
        fn random_patches_never_panic(
            doc in arb_value(),
            ops in proptest::collection::vec(arb_op(), 0..6),
            raw in arb_value(),
        ) {
            let _ = apply_json_patch(&doc, &Value::Array(ops));
            let _ = apply_json_patch(&doc, &raw);
            let _ = apply_merge_patch(&doc, &raw);
        }

        #[test]
        fn merging_objects_is_rfc_7386_but_for_arrays(
            doc in arb_object(
                prop_oneof![
                    any::<bool>().prop_map(Value::Bool),
                    (-3i64..4).prop_map(Value::from),
                    "[ab]{0,2}".prop_map(Value::String),
                    proptest::collection::vec((0i64..3).prop_map(Value::from), 0..3).prop_map(Value::Array),
                ]
            ),
            patch in arb_object(
                prop_oneof![
                    Just(Value::Null),
                    any::<bool>().prop_map(Value::Bool),
                    (-3i64..4).prop_map(Value::from),
                    Just(json!(0.5)),
                    "[ab]{0,2}".prop_map(Value::String),
                ]
            ),
        ) {
            // With no null or float in the document (both read differently
            // by the library) and no array in the patch (which it does not
            // prune when it replaces an object), the library is the RFC's
            // pseudo-code.
            fn rfc(target: &Value, patch: &Value) -> Value {
                let Value::Object(p) = patch else { return patch.clone() };
                let mut t = match target {
                    Value::Object(t) => t.clone(),
                    _ => Map::new(),
                };
                for (k, v) in p {
                    if v.is_null() {
                        t.shift_remove(k);
                    } else {
                        let cur = t.get(k).cloned().unwrap_or(Value::Null);
                        t.insert(k.clone(), rfc(&cur, v));
                    }
                }
                Value::Object(t)
            }
            prop_assert_eq!(apply_merge_patch(&doc, &patch).unwrap(), rfc(&doc, &patch));
        }
    }
}
