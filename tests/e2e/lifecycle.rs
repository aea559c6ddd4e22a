//! The cluster scripts' promises: `up` and `down` are idempotent, a failed
//! start says why and leaves nothing running, and clusters whose owner dies
//! (a killed test run) stop by themselves. These tests use their own run
//! directories, apart from the shared clusters.

use crate::fixture::{cluster_script, repo_root};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn run_dir(tag: &str) -> PathBuf {
    let dir = repo_root().join(format!("target/e2e-lifecycle-{tag}"));
    // Stop whatever an earlier, interrupted run left, then start clean.
    let _ = cluster_script("down", &dir).status();
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Pids of live processes whose command line names `run_dir`.
fn processes_of(run_dir: &Path) -> Vec<String> {
    let needle = run_dir.to_string_lossy().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(&needle) {
            found.push(format!(
                "{}: {cmdline}",
                entry.file_name().to_string_lossy()
            ));
        }
    }
    found
}

fn wait_until_gone(run_dir: &Path, timeout: Duration) {
    let start = Instant::now();
    loop {
        let left = processes_of(run_dir);
        if left.is_empty() {
            return;
        }
        assert!(
            start.elapsed() < timeout,
            "still running after {timeout:?}: {left:#?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn killed_owner_leaves_no_process_behind_and_up_down_are_idempotent() {
    let dir = run_dir("owner");
    let mut owner = Command::new("sleep").arg("600").spawn().unwrap();
    let up = |owner_pid: u32| {
        let output = cluster_script("up", &dir)
            .arg("--owner-pid")
            .arg(owner_pid.to_string())
            .stderr(Stdio::inherit())
            .output()
            .unwrap();
        assert!(output.status.success(), "cluster.sh up failed");
        String::from_utf8(output.stdout).unwrap()
    };
    let first = up(owner.id());
    let components = processes_of(&dir);
    for name in ["etcd", "kube-apiserver", "kube-controller-manager"] {
        let count = components
            .iter()
            .filter(|p| p.contains(&format!("/{name} ")))
            .count();
        assert_eq!(count, 2, "one {name} per cluster: {components:#?}");
    }
    assert_eq!(
        first,
        up(owner.id()),
        "a second up keeps the running clusters"
    );
    assert!(cluster_script("status", &dir).status().unwrap().success());

    owner.kill().unwrap();
    owner.wait().unwrap();
    wait_until_gone(&dir, Duration::from_secs(30));
    assert!(!cluster_script("status", &dir).status().unwrap().success());
    assert!(
        cluster_script("down", &dir).status().unwrap().success(),
        "down when down is fine"
    );
}

#[test]
fn failed_start_prints_the_log_tail_and_stops_everything() {
    let dir = run_dir("failed");
    let output = cluster_script("up", &dir)
        .env("BINDERY_APISERVER_EXTRA_ARGS", "--no-such-flag")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "up must fail with a bad flag");
    assert!(
        stderr.contains("kube-apiserver exited during start-up"),
        "{stderr}"
    );
    assert!(stderr.contains("---- last lines of"), "{stderr}");
    assert!(stderr.contains("unknown flag: --no-such-flag"), "{stderr}");
    wait_until_gone(&dir, Duration::from_secs(15));
}
