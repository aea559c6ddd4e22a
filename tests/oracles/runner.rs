//! Builds and runs the Go oracles in `tests/oracles/<name>` (and builds the
//! Go clients of `tests/clients/<name>` for the e2e tests): each is built
//! with the local Go toolchain into `<target>/oracles/<name>` (again only
//! when a source is newer than the binary); an oracle reads one case per
//! line on its stdin and answers one JSON line per case. Without Go, or when
//! the build fails, the test fails and says why: it never skips.

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::SystemTime;

fn go_binary(name: &str) -> PathBuf {
    let candidates = [
        Some(PathBuf::from("go")),
        std::env::var_os("GOROOT").map(|root| Path::new(&root).join("bin/go")),
        Some(PathBuf::from("/usr/local/go/bin/go")),
    ];
    for go in candidates.into_iter().flatten() {
        if Command::new(&go)
            .arg("version")
            .output()
            .is_ok_and(|out| out.status.success())
        {
            return go;
        }
    }
    panic!(
        "{name} oracle: no Go toolchain found (tried `go` on PATH, $GOROOT/bin/go, \
         /usr/local/go/bin/go); this test needs Go to build tests/oracles/{name}"
    );
}

fn modified(name: &str, path: &Path) -> SystemTime {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .unwrap_or_else(|e| panic!("{name} oracle: {}: {e}", path.display()))
}

/// The oracle `name`'s binary, built unless it is newer than its sources.
/// `needs` says what a failed build most likely lacked.
pub fn build(name: &str, needs: &str) -> PathBuf {
    build_from("tests/oracles", name, needs)
}

/// The Go program `<folder>/<name>`'s binary (`folder` from the repository
/// root), built unless it is newer than its sources.
pub fn build_from(folder: &str, name: &str, needs: &str) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(folder)
        .join(name);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target directory")
        .join("oracles");
    let binary = dir.join(name);
    let newest_source = ["main.go", "go.mod", "go.sum"]
        .iter()
        .map(|f| modified(name, &source.join(f)))
        .max()
        .expect("sources");
    if binary.exists() && modified(name, &binary) > newest_source {
        return binary;
    }
    std::fs::create_dir_all(&dir).expect("create the oracles directory");
    // Unique to this build: tests of one process may build one oracle at
    // once, and each moves only its own file into place.
    static BUILDS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let build = BUILDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let partial = dir.join(format!("{name}.{}.{build}.partial", std::process::id()));
    let out = Command::new(go_binary(name))
        .args(["build", "-o"])
        .arg(&partial)
        .arg(".")
        .current_dir(&source)
        .env("GOFLAGS", "-mod=readonly -buildvcs=false")
        .env("GOTOOLCHAIN", "local")
        // encoding/json as kube-apiserver v1.34 is built with it, not the
        // experimental v2-backed one.
        .env("GOEXPERIMENT", "")
        .output()
        .unwrap_or_else(|e| panic!("{name} oracle: cannot run go build: {e}"));
    assert!(
        out.status.success(),
        "{name} oracle: go build failed in {} ({needs}):\n{}{}",
        source.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::rename(&partial, &binary).expect("move the oracle into place");
    binary
}

/// Runs the oracle once over all lines; one answer per line, each read
/// with `decode`.
pub fn run(
    name: &str,
    binary: &Path,
    lines: &[String],
    decode: impl Fn(&str) -> Result<Value, String>,
) -> Vec<Value> {
    let mut child = Command::new(binary)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("{name} oracle: cannot run {}: {e}", binary.display()));
    let mut stdin = child.stdin.take().expect("stdin");
    let input: Vec<u8> = lines
        .iter()
        .flat_map(|l| [l.as_bytes(), b"\n"].concat())
        .collect();
    let writer = std::thread::spawn(move || {
        stdin.write_all(&input).expect("write to the oracle");
    });
    let answers: Vec<Value> = BufReader::new(child.stdout.take().expect("stdout"))
        .lines()
        .map(|line| {
            let line = line.expect("read from the oracle");
            decode(&line).unwrap_or_else(|e| panic!("{name} oracle: bad answer {line}: {e}"))
        })
        .collect();
    writer.join().expect("writer");
    let status = child.wait().expect("wait for the oracle");
    assert!(status.success(), "{name} oracle: exited with {status}");
    assert_eq!(
        answers.len(),
        lines.len(),
        "{name} oracle: one answer per case"
    );
    answers
}
