//! Two `bindery controllers` processes against one cluster: only the Lease
//! holder runs the controllers, and killing it hands over to the other
//! within the Lease time. The app cluster plays the provider here, so that
//! the test run's own `bindery serve` (and its controllers) stay out of it.

use crate::fixture::{clusters, repo_root, unique_name};

/// The template the two replicas' requests ask for, in the app cluster.
const TEMPLATE: &str = "leader-widgets";
use serde_json::json;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const LEASE_SECONDS: u64 = 4;

struct Replica {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Replica {
    fn start(name: &str, lease: &str, log_dir: &std::path::Path) -> Self {
        let app = &clusters().app;
        let log = log_dir.join(format!("{name}.log"));
        let child = Command::new(env!("CARGO_BIN_EXE_bindery"))
            .args(["controllers", "--provider-kubeconfig"])
            .arg(&app.kubeconfig)
            .args(["--lease-namespace", "default", "--lease-name", lease])
            .args(["--lease-identity", name])
            .args(["--lease-seconds", &LEASE_SECONDS.to_string()])
            .env("RUST_LOG", "bindery=info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("a log file"))
            .spawn()
            .expect("bindery controllers starts");
        Self {
            name: name.to_string(),
            child,
            log,
        }
    }

    fn has_led(&self) -> bool {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .contains("controllers start")
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn holder(lease: &str) -> String {
    let output = clusters().app.kubectl_output(
        &[
            "-n",
            "default",
            "get",
            "lease",
            lease,
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ],
        None,
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

fn wait_for_holder(lease: &str, among: &[&str], within: Duration) -> (String, Duration) {
    let start = Instant::now();
    loop {
        let current = holder(lease);
        if among.contains(&current.as_str()) {
            return (current, start.elapsed());
        }
        assert!(
            start.elapsed() < within,
            "no holder among {among:?} after {within:?} (holder: {current:?})"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Applies a request in the app cluster and waits until it is answered.
fn answered(name: &str) -> String {
    let app = &clusters().app;
    let request = json!({
        "apiVersion": "kube-bind.io/v1alpha2", "kind": "APIServiceExportRequest",
        "metadata": {"name": name, "namespace": "default",
            "annotations": {"backend.kube-bind.io/identity": name}},
        "spec": {"templateRef": {"name": TEMPLATE}},
    });
    app.kubectl_with_stdin(&["apply", "-f", "-"], Some(&request.to_string()));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let phase = app.kubectl(&[
            "-n",
            "default",
            "get",
            "apiserviceexportrequest",
            name,
            "-o",
            "jsonpath={.status.phase}",
        ]);
        if phase == "Succeeded" || phase == "Failed" {
            return phase;
        }
        assert!(
            Instant::now() < deadline,
            "request {name} unanswered: {phase:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn only_the_leader_runs_controllers_and_a_killed_leader_hands_over() {
    let app = &clusters().app;
    // The offer is a CRD no test binds into the app cluster: a local CRD of
    // a bound group would take its APIService from bindery.
    for path in [
        repo_root().join("deploy/crds"),
        repo_root().join("conformance/crds/widgets.yaml"),
    ] {
        app.kubectl(&["apply", "-f", &path.to_string_lossy()]);
        app.kubectl_wait(&[
            "--for=condition=Established",
            "--timeout=60s",
            "-f",
            &path.to_string_lossy(),
        ]);
    }
    let template = json!({
        "apiVersion": "kube-bind.io/v1alpha2", "kind": "APIServiceExportTemplate",
        "metadata": {"name": TEMPLATE},
        "spec": {"scope": "Namespaced",
            "resources": [{"group": "conformance.bindery.dev", "resource": "widgets"}]},
    });
    app.kubectl_with_stdin(&["apply", "-f", "-"], Some(&template.to_string()));

    let lease = unique_name("bindery-leader");
    let log_dir = crate::fixture::scratch_dir().join(&lease);
    std::fs::create_dir_all(&log_dir).expect("a log directory");
    let mut replicas = vec![
        Replica::start("replica-one", &lease, &log_dir),
        Replica::start("replica-two", &lease, &log_dir),
    ];
    let (leader, _) = wait_for_holder(
        &lease,
        &["replica-one", "replica-two"],
        Duration::from_secs(30),
    );
    assert_eq!(answered(&unique_name("before")), "Succeeded");
    let leader_index = replicas.iter().position(|r| r.name == leader).unwrap();
    let follower = replicas[1 - leader_index].name.clone();
    assert!(
        replicas[leader_index].has_led(),
        "the holder runs the controllers"
    );
    assert!(
        !replicas[1 - leader_index].has_led(),
        "the follower never ran the controllers while the other held the Lease"
    );

    // Kill the leader without a chance to step down.
    let mut killed = replicas.remove(leader_index);
    killed.child.kill().expect("killing the leader");
    let _ = killed.child.wait();
    let (new_holder, took) = wait_for_holder(
        &lease,
        &[follower.as_str()],
        Duration::from_secs(LEASE_SECONDS * 3 + 10),
    );
    println!("hand-over to {new_holder} took {took:?} (Lease time {LEASE_SECONDS} s)");
    assert!(
        took <= Duration::from_secs(LEASE_SECONDS * 2 + 2),
        "hand-over took {took:?}, more than the Lease time allows"
    );
    assert_eq!(answered(&unique_name("after")), "Succeeded");
    assert!(replicas[0].has_led(), "the new holder runs the controllers");
}
