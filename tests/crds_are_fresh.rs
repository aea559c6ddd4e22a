//! The CRDs committed in `deploy/crds/` must be exactly what the Rust types in
//! `src/api/` generate: no file stale, missing or extra.
//!
//! `BINDERY_UPDATE_CRDS=1 cargo test --test crds_are_fresh` rewrites the
//! directory from the types instead of checking it.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

fn crds_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/crds")
}

/// The files now in the directory, by name.
fn committed(dir: &Path) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return files,
        Err(e) => panic!("reading {}: {e}", dir.display()),
    };
    for entry in entries {
        let entry = entry.unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
        let path = entry.path();
        if !path.is_file() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let text =
            fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        files.insert(name, text);
    }
    files
}

fn update(dir: &Path, generated: &BTreeMap<String, String>) {
    fs::create_dir_all(dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    for name in committed(dir).keys() {
        if !generated.contains_key(name) {
            let path = dir.join(name);
            fs::remove_file(&path).unwrap_or_else(|e| panic!("removing {}: {e}", path.display()));
        }
    }
    for (name, text) in generated {
        let path = dir.join(name);
        fs::write(&path, text).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    }
}

#[test]
fn committed_crds_match_the_rust_types() {
    let dir = crds_dir();
    let generated: BTreeMap<String, String> = bindery::api::crds_yaml().into_iter().collect();

    if std::env::var("BINDERY_UPDATE_CRDS").as_deref() == Ok("1") {
        update(&dir, &generated);
        eprintln!("rewrote {} CRDs in {}", generated.len(), dir.display());
        return;
    }

    let committed = committed(&dir);
    let mut problems = Vec::new();
    for (name, text) in &generated {
        match committed.get(name) {
            None => problems.push(format!("missing: {name}")),
            Some(old) if old != text => problems.push(format!("stale: {name}")),
            Some(_) => {}
        }
    }
    for name in committed.keys() {
        if !generated.contains_key(name) {
            problems.push(format!("extra: {name}"));
        }
    }
    assert!(
        problems.is_empty(),
        "deploy/crds/ is out of date with src/api/:\n  {}\n\
         Regenerate with: BINDERY_UPDATE_CRDS=1 cargo test --test crds_are_fresh",
        problems.join("\n  ")
    );
}
