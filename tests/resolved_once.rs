//! A request is resolved once (issue 34, item 1): its path, its query and
//! its verb are read in `src/resolved.rs` alone, by the outermost layer, and
//! every later step reads the `Resolved` it kept. Read from the source
//! (code, not comments; test code left out), so that a second parse of a
//! caller's path or query fails here.
//!
//! The provider request is typed too (item 2): the watch cache reads the
//! resource and query the translation built (`upstream::CacheRead`), never
//! a path or a query string. One place reads a raw query besides, and is
//! named here with why: `bindery route`, a server of its own in front of
//! several bindery servers, rewrites the caller's query for each provider.
//! And the watch cache is handed data to translate with, not callbacks.

use std::path::Path;

mod source;
use source::sources;

/// A file's code before its first test item, without comment lines.
fn code_of(text: &str) -> String {
    let before_tests = text.find("#[cfg(test)]").map_or(text, |at| &text[..at]);
    before_tests
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every file (relative to `src/`) whose code uses one of `needles` (a
/// line defining it, `fn …`, is no use of it).
fn files_with(needles: &[&str]) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    let mut found: Vec<String> = files
        .iter()
        .filter(|file| {
            let code = code_of(&std::fs::read_to_string(file).expect("a source file"));
            code.lines().any(|line| {
                !line.contains("fn ") && needles.iter().any(|needle| line.contains(needle))
            })
        })
        .map(|file| {
            file.strip_prefix(&root)
                .expect("under src/")
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    found.sort();
    found
}

#[test]
fn the_callers_query_and_verb_are_read_in_one_place() {
    assert_eq!(
        files_with(&["Query::parse(", "Verb::of(", "is_watch("]),
        ["resolved.rs"],
        "a caller's query is parsed, and its verb worked out, only where the request is resolved"
    );
}

#[test]
fn the_callers_path_is_parsed_in_one_place() {
    assert_eq!(
        files_with(&[
            "route::parse(",
            "parse_legacy_resource(",
            "{parse}",
            " parse, "
        ]),
        ["resolved.rs"],
        "a caller's path is parsed only where the request is resolved"
    );
}

#[test]
fn only_the_routers_rewrites_read_a_raw_query() {
    assert_eq!(
        files_with(&[".query()"]),
        ["providers/merged.rs", "providers/router.rs", "resolved.rs"],
    );
}

#[test]
fn the_watch_cache_reads_the_typed_provider_request_not_its_path() {
    let cache: Vec<String> = files_with(&["uri().path()", "uri.path()", ".query()"])
        .into_iter()
        .filter(|file| file.starts_with("cache/"))
        .collect();
    assert_eq!(cache, Vec::<String>::new());
}

/// The watch cache is a layer with no callbacks into the proxy: what it is
/// handed to translate objects and make Table rows with is data (the
/// consumer's view, the columns), which it applies itself.
#[test]
fn the_watch_cache_is_handed_data_not_callbacks() {
    let door = code_of(
        &std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/upstream.rs"))
            .expect("src/upstream.rs"),
    );
    let callbacks: Vec<&str> = door
        .lines()
        .filter(|line| line.contains("dyn Fn") || line.contains("impl Fn"))
        .collect();
    assert_eq!(callbacks, Vec::<&str>::new());
    let cache: Vec<String> = files_with(&["dyn Fn() -> Translation", "translation()"])
        .into_iter()
        .filter(|file| file.starts_with("cache/"))
        .collect();
    assert_eq!(cache, Vec::<String>::new());
}
