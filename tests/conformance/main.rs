//! The differential conformance suite: every case in `conformance/cases/`
//! runs against the CRD served directly by the real provider kube-apiserver
//! (the reference), through bindery's consumer endpoint, and through the
//! real aggregation path: the app cluster's kube-apiserver, where
//! `bindery bind` registered the API; and twice through `bindery route`,
//! the router of several providers, each in an app cluster of its own:
//! once with `conf` (where most cases run) at a second provider and the
//! other namespaces at the default provider, once the other way round, so
//! that every case runs in a namespace of each provider and the cases
//! across namespaces merge both. Only what must differ
//! is normalized, and everything else must be identical to the reference.
//! Prints `N passed, N failed` and fails when any case differs.

#[allow(dead_code)]
#[path = "../e2e/binder.rs"]
mod binder;
#[allow(dead_code)]
#[path = "../e2e/bindery.rs"]
mod bindery;
mod case;
#[allow(dead_code)]
#[path = "../e2e/fixture.rs"]
mod fixture;
mod normalize;
#[allow(dead_code)]
#[path = "../e2e/router_fixture.rs"]
mod router_fixture;
mod target;

use fixture::{clusters, repo_root};
use target::{Actor, Target, Vars};

const CRD: &str = "widgets.conformance.bindery.dev";
/// `conf-a` lists before `conf` across namespaces (kube-apiserver's key
/// order: `-` sorts before `/`).
const NAMESPACES: &[&str] = &["conf", "conf2", "conf-a"];
/// The provider's offer of the case CRD, which the app cluster binds.
const TEMPLATE: &str = "apiVersion: kube-bind.io/v1alpha2
kind: APIServiceExportTemplate
metadata: {name: conformance-widgets}
spec:
  description: The conformance suite's Widgets.
  scope: Namespaced
  resources:
  - {group: conformance.bindery.dev, resource: widgets}
";

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
    fixture::want_reference_cluster();
    let (provider, app) = (&clusters().provider, &clusters().app);
    let reference = clusters()
        .reference
        .as_ref()
        .expect("the fixture starts the reference cluster when asked");
    // A separate cluster serves the same CRD directly: the reference for a
    // second consumer, which must be as separate as another cluster.
    for cluster in [provider, reference] {
        install_crd(cluster);
    }
    let consumer = bindery::bindery().consumer("conformance", CRD, "widgets");
    let other = bindery::bindery().consumer("conformance-other", CRD, "widgets");
    bind_into_app_cluster();
    let west = West::start();
    // `conf`, where most cases run, at the second provider; then at the
    // default one, with the others at the second.
    let routed_west = Routed::start("conformance-routed-west", &west, &["conf"]);
    let routed_east = Routed::start("conformance-routed-east", &west, &["conf2", "conf-a"]);
    let targets = [
        Target {
            name: "direct",
            main: Actor {
                kubeconfig: provider.kubeconfig.clone(),
                client: provider.client().await,
            },
            other: Actor {
                kubeconfig: reference.kubeconfig.clone(),
                client: reference.client().await,
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
        Target {
            name: "aggregated",
            main: Actor {
                kubeconfig: app.kubeconfig.clone(),
                client: app.client().await,
            },
            other: Actor {
                kubeconfig: other.kubeconfig.clone(),
                client: other.client().await,
            },
        },
        Target {
            name: "routed-west",
            main: Actor {
                kubeconfig: routed_west.app.kubeconfig.clone(),
                client: routed_west.app.client().await,
            },
            other: Actor {
                kubeconfig: other.kubeconfig.clone(),
                client: other.client().await,
            },
        },
        Target {
            name: "routed-east",
            main: Actor {
                kubeconfig: routed_east.app.kubeconfig.clone(),
                client: routed_east.app.client().await,
            },
            other: Actor {
                kubeconfig: other.kubeconfig.clone(),
                client: other.client().await,
            },
        },
    ];
    // The clusters that hold Widgets: the provider, the reference and the
    // routed targets' second provider.
    let cleaned = [
        provider.client().await,
        reference.client().await,
        west.cluster.client().await,
    ];
    let (mut passed, mut failed) = (0, 0);
    for (file, case) in &cases {
        let id = format!("{file}/{}", case.name);
        if filter.is_some_and(|f| !id.contains(f)) {
            continue;
        }
        let mut outputs: Vec<Vec<String>> = Vec::new();
        for target in &targets {
            for cluster in &cleaned {
                clean(cluster).await;
            }
            let mut vars = Vars::new();
            let mut texts = Vec::new();
            for step in &case.steps {
                let text = target.run(step, &mut vars).await;
                texts.push(if step.compare { text } else { String::new() });
            }
            outputs.push(texts);
        }
        let differences: Vec<String> = (1..targets.len())
            .flat_map(|t| {
                let names = format!("{} vs {}", targets[0].name, targets[t].name);
                outputs[0]
                    .iter()
                    .zip(&outputs[t])
                    .enumerate()
                    .filter(|(_, (a, b))| a != b)
                    .map(move |(i, (a, b))| {
                        format!("  step {i} differs ({names}):\n{}", diff(a, b))
                    })
                    .collect::<Vec<_>>()
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
    for cluster in &cleaned {
        clean(cluster).await;
    }
    let compared: Vec<String> = targets[1..]
        .iter()
        .map(|t| format!("{} vs {}", targets[0].name, t.name))
        .collect();
    println!(
        "\n{passed} passed, {failed} failed ({})",
        compared.join(", ")
    );
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

/// The second provider of the routed targets: a provider cluster of its
/// own serving the case CRD, with a bindery of its own.
struct West {
    cluster: fixture::Cluster,
    bindery: bindery::ServingOnly,
}

impl West {
    fn start() -> Self {
        let cluster = router_fixture::provider_cluster("conformance-west");
        install_crd(&cluster);
        let bindery = bindery::serving_only(&cluster.kubeconfig, &["--impersonate=false"]);
        Self { cluster, bindery }
    }
}

/// A routed target: an app cluster of its own whose APIService names
/// `bindery route` across east (the shared provider's bindery, the
/// default) and west, with `west_namespaces` labelled for west and the
/// other case namespaces east's.
struct Routed {
    app: fixture::Cluster,
    _router: router_fixture::Router,
}

impl Routed {
    fn start(tag: &str, west: &West, west_namespaces: &[&str]) -> Self {
        let west_consumer =
            router_fixture::consumer_at(&west.cluster, &west.bindery, &format!("{tag}-west"), CRD);
        let east = bindery::bindery().consumer(&format!("{tag}-east"), CRD, "widgets");
        let app = fixture::own_app_cluster(tag);
        for ns in NAMESPACES {
            app.kubectl(&["create", "namespace", ns]);
        }
        // Labelled before the router starts: it lists Namespaces before it
        // serves, so they are west's from the first request.
        for ns in west_namespaces {
            app.kubectl(&["label", "namespace", ns, "bindery.dev/provider=west"]);
        }
        let router = router_fixture::start_router(
            &app,
            &[("east", &east), ("west", &west_consumer)],
            "east",
        );
        router_fixture::reach_router(&app, "conformance.bindery.dev", router.port);
        Self {
            app,
            _router: router,
        }
    }
}

/// Binds the case CRD into the app cluster with `bindery bind`, as a binder
/// holding `bind`, and waits until kubectl there lists Widgets. The app
/// cluster gets the case namespaces, as the reference has them.
fn bind_into_app_cluster() {
    let (provider, app) = (&clusters().provider, &clusters().app);
    provider.kubectl_with_stdin(&["apply", "-f", "-"], Some(TEMPLATE));
    for ns in NAMESPACES {
        let _ = app.kubectl_output(&["create", "namespace", ns], None);
    }
    let (_, token) = binder::binder_token(true);
    binder::succeeded(
        "bindery bind --template conformance-widgets",
        &binder::bindery_cli("bind", &token, &["--template", "conformance-widgets"]),
    );
    // Served through bindery's APIService, never by a CRD of the app cluster.
    let local = app.kubectl_output(&["get", "crd", CRD], None);
    assert!(!local.status.success(), "the app cluster has no {CRD} CRD");
    let service = app.kubectl(&[
        "get",
        "apiservice",
        "v1.conformance.bindery.dev",
        "-o",
        "jsonpath={.spec.service.namespace}/{.spec.service.name}",
    ]);
    assert!(service.starts_with("kube-bind/bindery-"), "{service}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let listed = app.kubectl_output(&["get", CRD, "-A"], None);
        if listed.status.success() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "kubectl in the app cluster never listed {CRD}: {}",
            String::from_utf8_lossy(&listed.stderr)
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
}

/// Deletes every Widget of the cluster `client` reaches, finalizers and
/// all, and waits until they are gone; through the API (a kubectl process
/// per cluster, before every target of every case, was minutes of the
/// suite).
async fn clean(client: &kube::Client) {
    use kube::ResourceExt;
    use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind};
    use kube::api::{ListParams, Patch, PatchParams};
    let widgets = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("conformance.bindery.dev", "v1", "Widget"),
        "widgets",
    );
    let all: Api<DynamicObject> = Api::all_with(client.clone(), &widgets);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let left = all
            .list(&ListParams::default())
            .await
            .unwrap_or_else(|e| panic!("listing the Widgets to delete: {e}"))
            .items;
        if left.is_empty() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "Widgets still there after 60 s: {:?}",
            left.iter().map(|w| w.name_any()).collect::<Vec<_>>()
        );
        for widget in &left {
            let namespace = widget.namespace().unwrap_or_default();
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), &namespace, &widgets);
            let name = widget.name_any();
            if !widget.finalizers().is_empty() {
                let unfinalized = serde_json::json!({"metadata": {"finalizers": null}});
                let _ = api
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&unfinalized))
                    .await;
            }
            if widget.metadata.deletion_timestamp.is_none() {
                let _ = api.delete(&name, &DeleteParams::default()).await;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// The lines of `reference` and `other` that differ.
fn diff(reference: &str, other: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (reference.lines().collect(), other.lines().collect());
    let mut out = String::new();
    for i in 0..a.len().max(b.len()) {
        let (x, y) = (
            a.get(i).copied().unwrap_or("<none>"),
            b.get(i).copied().unwrap_or("<none>"),
        );
        if x != y {
            out.push_str(&format!(
                "    line {i}\n      reference: {x}\n      other:     {y}\n"
            ));
        }
    }
    out
}
