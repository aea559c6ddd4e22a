//! How deep a JSON value bindery handles can be, and the one place that
//! reads JSON of any such depth.
//!
//! kube-apiserver accepts an object nested 10,000 levels deep (Go's
//! `encoding/json` `maxNestingDepth`, which `sigs.k8s.io/json` keeps), stores
//! it, and answers lists, watch events and Tables with it a few levels
//! deeper still. serde_json reads 128 levels unless told otherwise, and its
//! `Value` is cloned, compared, serialized and dropped by recursion. So
//! bindery holds one bound, [`MAX_DEPTH`], everywhere:
//!
//! - every JSON it reads (provider answers, cached objects, watch events)
//!   goes through [`from_slice`]: serde_json's own reader while the value is
//!   shallow, and past its 128 levels the same reader without that limit,
//!   after an iterative count has shown the value is no deeper than
//!   [`MAX_DEPTH`]; deeper is an error, never a recursion. Request bodies are
//!   read iteratively by `wire::json`, which refuses what Go refuses;
//! - every thread that handles values (the async runtime's workers and its
//!   blocking pool: [`runtime`]) has a stack of [`THREAD_STACK`] bytes, sized
//!   for the deepest recursion a value of [`MAX_DEPTH`] levels takes in a
//!   debug build (the larger frames), with room to spare. A stack is address
//!   space; only the pages a deep value touched become memory.
//!
//! `tests/e2e/containment.rs` sends bodies at the limit through every write
//! verb and reads them back through every read form with a debug build.

use std::ops::ControlFlow;

/// The deepest object kube-apiserver decodes (Go's `maxNestingDepth`).
pub const OBJECT_DEPTH: usize = 10_000;

/// The deepest JSON bindery reads. An object Go read at [`OBJECT_DEPTH`]
/// comes back deeper: its `managedFields` mirror its fields five levels
/// further down (`metadata`, the list, the entry, `fieldsV1`, `f:spec`…),
/// and the envelopes kube-apiserver writes around objects add up to four
/// (a list's `items`, a watch event's `object`, a Table's `rows[].object`,
/// a watch event of a Table). The rest is room.
pub const MAX_DEPTH: usize = OBJECT_DEPTH + 64;

/// The stack of every thread that handles values. A debug build (larger
/// frames than a release build) needs between 16 and 32 MiB to take an
/// object of [`OBJECT_DEPTH`] through every write verb and every read form
/// (measured with `tests/e2e/containment.rs` and smaller stacks: 16 MiB
/// overflowed, 32 MiB did not); this is four times the larger.
pub const THREAD_STACK: usize = 128 << 20;

/// The async runtime every bindery command runs on: tokio's multi-threaded
/// runtime, with [`THREAD_STACK`] for its workers and blocking threads.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(THREAD_STACK)
        .build()
}

/// Reads `bytes` as a `T`, as deep as [`MAX_DEPTH`].
pub fn from_slice<'a, T: serde::Deserialize<'a>>(bytes: &'a [u8]) -> serde_json::Result<T> {
    read_slice(bytes, |deserializer| T::deserialize(deserializer))
}

/// [`from_slice`] of text, for what borrows from it too.
pub fn from_str<'a, T: serde::Deserialize<'a>>(text: &'a str) -> serde_json::Result<T> {
    read_str(text, |deserializer| T::deserialize(deserializer))
}

/// Reads `bytes` whole with `read` (a visitor of bindery's own, say), as
/// deep as [`MAX_DEPTH`]: with serde_json's recursion limit, and when that
/// refuses, counted and read again without it.
pub fn read_slice<'a, T>(
    bytes: &'a [u8],
    read: impl Fn(&mut serde_json::Deserializer<serde_json::de::SliceRead<'a>>) -> serde_json::Result<T>,
) -> serde_json::Result<T> {
    read_whole(bytes, || serde_json::Deserializer::from_slice(bytes), read)
}

/// [`read_slice`] of text.
pub fn read_str<'a, T>(
    text: &'a str,
    read: impl Fn(&mut serde_json::Deserializer<serde_json::de::StrRead<'a>>) -> serde_json::Result<T>,
) -> serde_json::Result<T> {
    read_whole(
        text.as_bytes(),
        || serde_json::Deserializer::from_str(text),
        read,
    )
}

/// `read` over a deserializer of `bytes` from `new`, to the end of the
/// input: with serde_json's limit first, without it past the limit.
fn read_whole<'a, R: serde_json::de::Read<'a>, T>(
    bytes: &[u8],
    new: impl Fn() -> serde_json::Deserializer<R>,
    read: impl Fn(&mut serde_json::Deserializer<R>) -> serde_json::Result<T>,
) -> serde_json::Result<T> {
    let whole = |deserializer: &mut serde_json::Deserializer<R>| {
        let value = read(deserializer)?;
        deserializer.end()?;
        Ok(value)
    };
    match whole(&mut new()) {
        Err(error) if is_recursion_limit(&error) => {
            within_limit(bytes)?;
            let mut deserializer = new();
            deserializer.disable_recursion_limit();
            whole(&mut deserializer)
        }
        read => read,
    }
}

/// An error when `bytes` nest deeper than [`MAX_DEPTH`].
fn within_limit(bytes: &[u8]) -> serde_json::Result<()> {
    let depth = depth_of(bytes);
    if depth > MAX_DEPTH {
        return Err(serde::de::Error::custom(format!(
            "nested {depth} levels deep, more than the {MAX_DEPTH} bindery reads"
        )));
    }
    Ok(())
}

/// Whether serde_json refused for its recursion limit.
fn is_recursion_limit(error: &serde_json::Error) -> bool {
    error.is_syntax() && error.to_string().starts_with("recursion limit exceeded")
}

/// The deepest nesting of arrays and objects in `bytes`, counted without
/// recursion. Brackets inside strings do not count; the text need not be
/// valid (the reader that follows says why it is not).
pub fn depth_of(bytes: &[u8]) -> usize {
    let mut deepest = 0;
    brackets(bytes, |depth, _| {
        deepest = deepest.max(depth);
        ControlFlow::Continue(())
    });
    deepest
}

/// The bracket that opens the first array or object nested deeper than
/// Go's JSON scanner reads ([`OBJECT_DEPTH`]), if any: where Go's
/// `invalid character '{' exceeded max depth` points.
pub fn past_go_depth(json: &[u8]) -> Option<u8> {
    let mut past = None;
    brackets(json, |depth, bracket| {
        if depth > OBJECT_DEPTH {
            past = Some(bracket);
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    past
}

/// Calls `opened` with the depth it reaches and the bracket, for each
/// bracket opening an array or object in `json` (outside strings), until it
/// breaks.
fn brackets(json: &[u8], mut opened: impl FnMut(usize, u8) -> ControlFlow<()>) {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &byte in json {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                if opened(depth, byte).is_break() {
                    return;
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::Value;

    /// `{"a":{"a":…null…}}`, `levels` objects deep.
    fn nested(levels: usize) -> String {
        let mut text = String::with_capacity(levels * 6 + 4);
        for _ in 0..levels {
            text.push_str("{\"a\":");
        }
        text.push_str("null");
        for _ in 0..levels {
            text.push('}');
        }
        text
    }

    /// Runs `f` on a thread with the runtime's stack, as bindery runs it.
    fn on_a_runtime_thread(f: impl FnOnce() + Send + 'static) {
        std::thread::Builder::new()
            .stack_size(THREAD_STACK)
            .spawn(f)
            .expect("a thread")
            .join()
            .expect("no overflow");
    }

    #[test]
    fn values_up_to_the_limit_are_read_and_handled_on_a_runtime_thread() {
        on_a_runtime_thread(|| {
            for levels in [1, 127, 128, 129, 150, 1000, MAX_DEPTH] {
                let text = nested(levels);
                let value: Value =
                    from_slice(text.as_bytes()).unwrap_or_else(|e| panic!("{levels} levels: {e}"));
                assert_eq!(depth_of(text.as_bytes()), levels);
                // What bindery does with a value: clone, compare,
                // serialize, drop.
                let copy = value.clone();
                assert!(copy == value);
                assert_eq!(serde_json::to_string(&copy).unwrap(), text);
                drop(copy);
                drop(value);
            }
        });
    }

    #[test]
    fn deeper_than_the_limit_is_an_error_not_an_overflow() {
        on_a_runtime_thread(|| {
            let text = nested(MAX_DEPTH + 1);
            let error = from_slice::<Value>(text.as_bytes()).unwrap_err();
            assert!(error.to_string().contains("more than the"), "{error}");
            // Far deeper still: counted, never recursed into.
            let text = nested(1_000_000);
            assert!(from_slice::<Value>(text.as_bytes()).is_err());
        });
    }

    #[test]
    fn past_gos_depth_names_the_bracket_go_stops_at() {
        assert_eq!(past_go_depth(nested(OBJECT_DEPTH).as_bytes()), None);
        assert_eq!(
            past_go_depth(nested(OBJECT_DEPTH + 1).as_bytes()),
            Some(b'{')
        );
        let arrays = format!(
            "{{\"a\":\"{{{{\",\"b\":{}{}}}",
            "[".repeat(OBJECT_DEPTH),
            "]".repeat(OBJECT_DEPTH)
        );
        assert_eq!(
            past_go_depth(arrays.as_bytes()),
            Some(b'['),
            "brackets in strings do not count"
        );
    }

    #[test]
    fn shallow_errors_are_serde_jsons_own() {
        let error = from_slice::<Value>(b"{\"a\":").unwrap_err();
        assert!(error.is_eof(), "{error}");
        let text = format!("{} x", nested(200));
        on_a_runtime_thread(move || {
            let error = from_slice::<Value>(text.as_bytes()).unwrap_err();
            assert!(error.is_syntax(), "trailing characters: {error}");
        });
    }

    #[test]
    fn typed_reads_reach_the_limit_too() {
        #[derive(serde::Deserialize)]
        struct Envelope {
            object: Value,
        }
        on_a_runtime_thread(|| {
            let text = format!("{{\"object\":{}}}", nested(OBJECT_DEPTH));
            let envelope: Envelope = from_str(&text).expect("an event at the limit");
            assert!(envelope.object.is_object());
        });
    }

    proptest! {
        #[test]
        fn depth_counts_what_serde_json_nests(value in arbitrary_json()) {
            let text = serde_json::to_string(&value).unwrap();
            prop_assert_eq!(depth_of(text.as_bytes()), nesting(&value));
        }
    }

    fn nesting(value: &Value) -> usize {
        match value {
            Value::Array(items) => 1 + items.iter().map(nesting).max().unwrap_or(0),
            Value::Object(map) => 1 + map.values().map(nesting).max().unwrap_or(0),
            _ => 0,
        }
    }

    fn arbitrary_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            // Strings with brackets, quotes and escapes in them.
            "[\\[\\]{}\"\\\\a-z]{0,8}".prop_map(Value::from),
        ];
        leaf.prop_recursive(6, 48, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[\\[\\]{}\"a-z]{0,4}", inner, 0..4)
                    .prop_map(|map| Value::Object(map.into_iter().collect())),
            ]
        })
    }
}
