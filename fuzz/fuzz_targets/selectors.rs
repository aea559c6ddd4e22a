//! Query strings as Go's `url.ParseQuery` reads them, each verb's options
//! read from them, and label and field selectors (`labels.Parse`,
//! `fields.ParseSelector`): read without a panic, and a selector that
//! parses is written again as one that parses, and is written the same from
//! then on. (Not always the same as first written: Go sorts a field
//! selector's terms as they came, `==` before `=` is read, so `=a,==b`
//! comes back as `=a,=b` and then as itself.)

#![no_main]

use bindery::wire::query::{
    DeleteOptions, GetOptions, ListOptions, Query, TableOptions, WriteOptions,
};
use bindery::wire::selector::{parse_field_selector, parse_label_selector};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let query = Query::parse(Some(text));
    let _ = ListOptions::parse(&query);
    let _ = GetOptions::parse(&query);
    let _ = WriteOptions::parse(&query, true);
    let _ = DeleteOptions::parse(&query);
    let _ = TableOptions::parse(&query);
    let _ = bindery::wire::query::timeout(&query);
    let _ = bindery::wire::query::go_duration(text);
    let _ = bindery::wire::query::go_int64(text);
    if let Ok(selector) = parse_label_selector(text) {
        settles(text, selector.to_string(), |t| {
            parse_label_selector(t).map(|s| s.to_string())
        });
    }
    if let Ok(selector) = parse_field_selector(text) {
        settles(text, selector.to_string(), |t| {
            parse_field_selector(t).map(|s| s.to_string())
        });
    }
});

/// `written` (what `text` parsed to, written) parses, and writing it again
/// twice gives the same.
fn settles(text: &str, written: String, round: impl Fn(&str) -> Result<String, String>) {
    let again = round(&written)
        .unwrap_or_else(|e| panic!("{text:?} written as {written:?} does not parse: {e}"));
    let third = round(&again)
        .unwrap_or_else(|e| panic!("{text:?} written as {again:?} does not parse: {e}"));
    assert_eq!(third, again, "{text:?}");
}
