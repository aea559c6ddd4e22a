//! The differential conformance suite: every case in `conformance/cases/`
//! runs against the CRD served directly by the real provider kube-apiserver
//! and through bindery's consumer endpoint; only what must differ is
//! normalized, and everything else must be identical. Prints
//! `N passed, N failed` and fails when any case differs.

#[allow(dead_code)]
#[path = "../e2e/bindery.rs"]
mod bindery;
mod case;
#[allow(dead_code)]
#[path = "../e2e/fixture.rs"]
mod fixture;
mod normalize;
mod target;

use fixture::{clusters, repo_root};
use target::{Actor, Target, Vars};

const CRD: &str = "widgets.conformance.bindery.dev";
const NAMESPACES: &[&str] = &["conf", "conf2"];

fn main() {
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let failed = runtime.block_on(run(filter.as_deref()));
    if failed {
        std::process::exit(1);
    }
}

async fn run(filter: Option<&str>) -> bool {
    let cases = case::load(&repo_root().join("conformance/cases"))
        .unwrap_or_else(|e| panic!("loading cases: {e}"));
    let (provider, app) = (&clusters().provider, &clusters().app);
    // The app cluster serves the same CRD directly: the reference for a
    // second consumer, which must be as separate as another cluster.
    for cluster in [provider, app] {
        install_crd(cluster);
    }
    let consumer = bindery::bindery().consumer("conformance", CRD, "widgets");
    let other = bindery::bindery().consumer("conformance-other", CRD, "widgets");
    let targets = [
        Target {
            name: "direct",
            main: Actor {
                kubeconfig: provider.kubeconfig.clone(),
                client: provider.client().await,
            },
            other: Actor {
                kubeconfig: app.kubeconfig.clone(),
                client: app.client().await,
            },
        },
        Target {
            name: "bindery",
            main: Actor {
                kubeconfig: consumer.kubeconfig.clone(),
                client: consumer.client().await,
            },
            other: Actor {
                kubeconfig: other.kubeconfig.clone(),
                client: other.client().await,
            },
        },
    ];
    let (mut passed, mut failed) = (0, 0);
    for (file, case) in &cases {
        let id = format!("{file}/{}", case.name);
        if filter.is_some_and(|f| !id.contains(f)) {
            continue;
        }
        let mut outputs: Vec<Vec<String>> = Vec::new();
        for target in &targets {
            clean(provider);
            clean(app);
            let mut vars = Vars::new();
            let mut texts = Vec::new();
            for step in &case.steps {
                let text = target.run(step, &mut vars).await;
                texts.push(if step.compare { text } else { String::new() });
            }
            outputs.push(texts);
        }
        let differences: Vec<String> = outputs[0]
            .iter()
            .zip(&outputs[1])
            .enumerate()
            .filter(|(_, (a, b))| a != b)
            .map(|(i, (a, b))| {
                let names = format!("{} vs {}", targets[0].name, targets[1].name);
                format!("  step {i} differs ({names}):\n{}", diff(a, b))
            })
            .collect();
        if differences.is_empty() {
            passed += 1;
            println!("ok   {id}");
        } else {
            failed += 1;
            println!("FAIL {id}\n{}", differences.join("\n"));
        }
    }
    clean(provider);
    clean(app);
    println!("\n{passed} passed, {failed} failed");
    failed > 0 || passed == 0
}

/// Installs the case CRD and the case namespaces in `cluster`.
fn install_crd(cluster: &fixture::Cluster) {
    cluster.kubectl(&[
        "apply",
        "-f",
        &repo_root().join("conformance/crds").to_string_lossy(),
    ]);
    cluster.kubectl(&[
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        &format!("crd/{CRD}"),
    ]);
    for ns in NAMESPACES {
        let _ = cluster.kubectl_output(&["create", "namespace", ns], None);
    }
}

/// Deletes every Widget in `cluster`, finalizers and all, and waits.
fn clean(cluster: &fixture::Cluster) {
    let names = cluster.kubectl(&[
        "get",
        "widgets.conformance.bindery.dev",
        "-A",
        "-o",
        "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}{\"\\n\"}{end}",
    ]);
    for line in names.lines().filter(|l| !l.is_empty()) {
        let (ns, name) = line.split_once('/').expect("namespace/name");
        let _ = cluster.kubectl_output(
            &[
                "-n",
                ns,
                "patch",
                "widgets.conformance.bindery.dev",
                name,
                "--type=merge",
                "-p",
                r#"{"metadata":{"finalizers":null}}"#,
            ],
            None,
        );
    }
    cluster.kubectl(&[
        "delete",
        "widgets.conformance.bindery.dev",
        "-A",
        "--all",
        "--wait=true",
        "--timeout=60s",
    ]);
}

/// The lines of `reference` and `bindery` that differ.
fn diff(reference: &str, bindery: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (reference.lines().collect(), bindery.lines().collect());
    let mut out = String::new();
    for i in 0..a.len().max(b.len()) {
        let (x, y) = (
            a.get(i).copied().unwrap_or("<none>"),
            b.get(i).copied().unwrap_or("<none>"),
        );
        if x != y {
            out.push_str(&format!(
                "    line {i}\n      direct:  {x}\n      bindery: {y}\n"
            ));
        }
    }
    out
}
