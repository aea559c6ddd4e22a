//! The files of `src/`, for the tests that read the code itself
//! (`layering.rs`, `resolved_once.rs`).

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`.
pub fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src/ is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}
