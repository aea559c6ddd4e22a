//! Several providers, one app cluster (`bindery route`): the same
//! group/resource bound from two provider clusters, each with its own
//! bindery, into one app cluster whose APIService names the router. A
//! namespace's objects live at the provider its Namespace names (else the
//! default); kubectl across namespaces sees both providers as one resource,
//! and a watch across namespaces resumes from any event's version without
//! missing or repeating one.

use crate::bindery::{Consumer, bindery};
use crate::fixture::{Cluster, clusters, own_app_cluster};
use crate::router_fixture::{
    GROUP, PLURAL, Router, gadget, refusal, second_provider, start_router, stored,
};
use futures::{StreamExt, TryStreamExt};
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, WatchEvent, WatchParams,
};
use std::time::{Duration, Instant};

/// What the app cluster's quotas count of the gadgets.
const COUNTED: &str = "count/gadgets.routed.example.com";

/// Two providers of one resource and an app cluster routed across them:
/// `team_east` names no provider (the default, east: the shared provider
/// and bindery), `team_west` names west (a provider cluster and bindery of
/// the test's own).
struct TwoProviders {
    east: Consumer,
    west: Consumer,
    west_cluster: Cluster,
    west_bindery: crate::bindery::ServingOnly,
    app: Cluster,
    team_east: String,
    team_west: String,
    _router: Router,
}

impl TwoProviders {
    /// Set up under `tag` (the test's own clusters' name).
    fn new(tag: &str) -> Self {
        let id = crate::fixture::unique_name("r");
        static CRD: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        let crd = CRD.get_or_init(|| {
            clusters()
                .provider
                .install_open_crd(GROUP, PLURAL, "Gadget", "Namespaced")
        });
        let east = bindery().consumer(&format!("{id}-east"), crd, PLURAL);
        let (west_cluster, west_bindery, west) = second_provider(tag, &format!("{id}-west"), crd);
        let app = own_app_cluster(tag);
        let router = start_router(&app, &[("east", &east), ("west", &west)], "east");
        crate::router_fixture::reach_router(&app, GROUP, router.port);
        let (team_east, team_west) = (format!("{id}-e"), format!("{id}-w"));
        crate::router_fixture::routed_namespaces(&app, &team_east, &team_west);
        let two = Self {
            east,
            west,
            west_cluster,
            west_bindery,
            app,
            team_east,
            team_west,
            _router: router,
        };
        // The router reads Namespaces by a watch: wait until it routes
        // team-west, by an object made there.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let _ = two.app.kubectl_output(
                &["-n", &two.team_west, "create", "-f", "-"],
                Some(&gadget("probe").to_string()),
            );
            let routed = two
                .stored_west()
                .contains(&two.at_west(&two.team_west, "probe"));
            two.app.kubectl(&[
                "-n",
                &two.team_west,
                "delete",
                PLURAL,
                "probe",
                "--ignore-not-found",
            ]);
            if routed {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the router never routed {} to west",
                two.team_west
            );
            std::thread::sleep(Duration::from_millis(300));
        }
        two
    }

    /// `bindery move-namespace` of `namespace` to the provider `to`.
    fn move_namespace(&self, namespace: &str, to: &str) {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_bindery"))
            .args(["move-namespace", "--namespace", namespace, "--to", to])
            .args(["--default-provider", "east"])
            .arg("--kubeconfig")
            .arg(&self.app.kubeconfig)
            .arg("--provider")
            .arg(format!("east={}", self.east.kubeconfig.display()))
            .arg("--provider")
            .arg(format!("west={}", self.west.kubeconfig.display()))
            .output()
            .expect("bindery move-namespace runs");
        assert!(
            output.status.success(),
            "bindery move-namespace: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// A merge patch of gadget `name` in `namespace`, through the app cluster.
    fn patch(&self, namespace: &str, name: &str, patch: &str) {
        self.app.kubectl(&[
            "-n",
            namespace,
            "patch",
            PLURAL,
            name,
            "--type=merge",
            "-p",
            patch,
        ]);
    }

    fn create(&self, namespace: &str, name: &str) {
        self.app.kubectl_with_stdin(
            &["-n", namespace, "create", "-f", "-"],
            Some(&gadget(name).to_string()),
        );
    }

    /// Where the east provider keeps `name` of `namespace`.
    fn at_east(&self, namespace: &str, name: &str) -> String {
        format!("kube-bind-{}-{namespace}/{name}", self.east.id)
    }

    fn at_west(&self, namespace: &str, name: &str) -> String {
        format!("kube-bind-{}-{namespace}/{name}", self.west.id)
    }

    /// Registers the app cluster with both providers' binderies for its
    /// consumer, as `bindery bind` registers it with each provider: a
    /// kubeconfig reaching it and its front-proxy CA (the Secret
    /// `app-cluster` in the consumer's cluster namespace). Each provider's
    /// bindery then charges the app cluster's quotas for creates routed to
    /// it.
    fn register_app_cluster(&self) {
        let ca = self.app.kubectl(&[
            "-n",
            "kube-system",
            "get",
            "configmap",
            "extension-apiserver-authentication",
            "-o",
            "jsonpath={.data.requestheader-client-ca-file}",
        ]);
        let ca_file = crate::fixture::scratch_dir().join(crate::fixture::unique_name("ca.crt"));
        std::fs::write(&ca_file, ca).expect("writing the front-proxy CA");
        for (provider, consumer) in [
            (&clusters().provider, &self.east),
            (&self.west_cluster, &self.west),
        ] {
            provider.kubectl(&[
                "-n",
                &consumer.cluster_namespace,
                "create",
                "secret",
                "generic",
                "app-cluster",
                &format!("--from-file=kubeconfig={}", self.app.kubeconfig.display()),
                &format!(
                    "--from-file=requestheader-client-ca.crt={}",
                    ca_file.display()
                ),
            ]);
        }
    }

    fn stored_east(&self) -> Vec<String> {
        stored(&clusters().provider)
    }

    fn stored_west(&self) -> Vec<String> {
        stored(&self.west_cluster)
    }
}

#[test]
fn one_resource_from_two_providers_routed_by_namespace_and_read_as_one() {
    let two = TwoProviders::new("routed");
    let (app, team_east, team_west) = (&two.app, two.team_east.as_str(), two.team_west.as_str());
    two.create(team_west, "b");
    two.create(team_east, "a");

    // Each object is stored at its namespace's provider, and only there.
    let east_stored = two.stored_east();
    let west_stored = two.stored_west();
    assert!(
        east_stored.contains(&two.at_east(team_east, "a")),
        "{east_stored:?}"
    );
    assert!(
        west_stored.contains(&two.at_west(team_west, "b")),
        "{west_stored:?}"
    );
    assert!(
        !east_stored
            .iter()
            .any(|s| s.ends_with(&format!("{team_west}/b"))),
        "{east_stored:?}"
    );
    assert!(
        !west_stored
            .iter()
            .any(|s| s.ends_with(&format!("{team_east}/a"))),
        "{west_stored:?}"
    );
    // A namespace sees only its own provider's objects.
    let missing = app.kubectl_output(&["-n", team_east, "get", PLURAL, "b"], None);
    assert!(!missing.status.success(), "b is not in {team_east}");
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("NotFound"),
        "{missing:?}"
    );

    // kubectl across namespaces: one resource, both providers, a Table.
    let listed = app.kubectl(&["get", PLURAL, "-A"]);
    assert!(
        listed.contains(team_east) && listed.contains(team_west),
        "{listed}"
    );
    let json = app.kubectl(&["get", PLURAL, "-A", "-o", "json"]);
    let json: serde_json::Value = serde_json::from_str(&json).expect("a list");
    let names: Vec<&str> = json["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|item| item["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, ["a", "b"], "{json}");
    // kubectl in chunks of one: a page per object, both providers.
    let chunked = app.kubectl(&["get", PLURAL, "-A", "--chunk-size=1", "-o", "name"]);
    let chunked: Vec<&str> = chunked.lines().collect();
    assert_eq!(
        chunked,
        [format!("gadget.{GROUP}/a"), format!("gadget.{GROUP}/b")],
        "{chunked:?}"
    );

    // A watch across namespaces, from a merged list's version, resumed from
    // its first event's version: the second event once, nothing before.
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        let client = app.client().await;
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(GROUP, "v1", "Gadget"),
            PLURAL,
        );
        let all: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let list = all
            .list(&ListParams::default())
            .await
            .expect("a list across providers");
        let version = list.metadata.resource_version.clone().expect("a version");
        assert_eq!(
            version.split('.').count(),
            2,
            "one version per provider: {version}"
        );
        assert_eq!(list.items.len(), 2);

        let events = all
            .watch(&WatchParams::default().timeout(20), &version)
            .await
            .expect("a watch across providers");
        futures::pin_mut!(events);
        let create = |ns: &str, name: &str| {
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
            let object: DynamicObject = serde_json::from_value(gadget(name)).expect("a gadget");
            async move {
                api.create(&Default::default(), &object)
                    .await
                    .expect("created")
            }
        };
        create(team_west, "c").await;
        let first = next_added(&mut events).await;
        create(team_east, "d").await;
        let second = next_added(&mut events).await;
        assert_eq!(
            (
                first.metadata.name.as_deref(),
                second.metadata.name.as_deref()
            ),
            (Some("c"), Some("d"))
        );
        let resumed_from = first.metadata.resource_version.clone().expect("a version");
        assert_eq!(resumed_from.split('.').count(), 2, "{resumed_from}");
        let resumed = all
            .watch(&WatchParams::default().timeout(3), &resumed_from)
            .await
            .expect("a resumed watch");
        let seen: Vec<String> = resumed
            .try_filter_map(|event| async move {
                Ok(match event {
                    WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => {
                        o.metadata.name
                    }
                    _ => None,
                })
            })
            .try_collect()
            .await
            .expect("the resumed watch");
        assert_eq!(seen, ["d"], "resumed after c: d once, nothing else");

        // An object as the watch gave it (the merged version) is written
        // back to its own provider.
        let mut object = first;
        object.data["spec"]["size"] = serde_json::json!(2);
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), team_west, &resource);
        let replaced = api
            .replace("c", &Default::default(), &object)
            .await
            .expect("replaced with the merged version");
        assert_eq!(replaced.data["spec"]["size"], 2);

        // Paged with a limit of one, in namespace then name order, every
        // page at the first page's versions, and a write between pages not
        // seen (the pages are one list).
        let mut token: Option<String> = None;
        let mut paged = Vec::new();
        let mut versions = Vec::new();
        loop {
            let mut params = ListParams::default().limit(1);
            if let Some(token) = &token {
                params = params.continue_token(token);
            }
            let page = all.list(&params).await.expect("a page across providers");
            versions.push(page.metadata.resource_version.clone().expect("a version"));
            paged.extend(page.items.iter().filter_map(|o| o.metadata.name.clone()));
            if paged.len() == 1 {
                create(team_east, "late").await;
            }
            token = page.metadata.continue_.filter(|t| !t.is_empty());
            if token.is_none() {
                break;
            }
            assert!(paged.len() <= 4, "{paged:?}");
        }
        assert_eq!(paged, ["a", "d", "b", "c"], "{versions:?}");
        assert_eq!(versions.len(), 4, "a page per object");
        assert!(versions.iter().all(|v| *v == versions[0]), "{versions:?}");
        // At any version the limit is ignored, as kube-apiserver's watch
        // cache ignores it: the whole list, no token. (Asked by hand: kube-rs
        // leaves the version out when it sends a limit.) Caches may lag the
        // create just made: a moment to catch up.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let request = http::Request::get(format!(
                "/apis/{GROUP}/v1/{PLURAL}?limit=1&resourceVersion=0"
            ))
            .body(Vec::new())
            .expect("a request");
            let whole: serde_json::Value = client
                .request(request)
                .await
                .expect("a list at any version");
            assert!(
                whole["metadata"]["continue"]
                    .as_str()
                    .is_none_or(str::is_empty),
                "no token: {whole}"
            );
            let count = whole["items"].as_array().map_or(0, Vec::len);
            if count == 5 {
                break;
            }
            assert!(count >= 4, "the whole list, not a page of one: {whole}");
            assert!(tokio::time::Instant::now() < deadline, "a, d, late, b, c");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let bad = all
            .list(&ListParams::default().limit(1).continue_token("not-a-token"))
            .await
            .expect_err("a token the router did not give");
        assert!(
            matches!(bad, kube::Error::Api(ref s) if s.code == 400),
            "{bad:?}"
        );
    });
    let west_stored = two.stored_west();
    assert!(
        west_stored.contains(&two.at_west(team_west, "c")),
        "{west_stored:?}"
    );

    // Object routing: in a namespace labelled for it, each object names its
    // provider; reads of the namespace show both, a named request finds the
    // object where it is, and an object does not change provider.
    let mixed = format!("{team_east}-mix");
    app.kubectl(&["create", "namespace", &mixed]);
    app.kubectl(&[
        "label",
        "namespace",
        &mixed,
        "bindery.dev/object-routing=true",
    ]);
    let mut routed = gadget("x");
    routed["metadata"]["annotations"] = serde_json::json!({"bindery.dev/provider": "west"});
    let deadline = Instant::now() + Duration::from_secs(30);
    while !two.stored_west().contains(&two.at_west(&mixed, "x")) {
        let _ = app.kubectl_output(
            &["-n", &mixed, "delete", PLURAL, "x", "--ignore-not-found"],
            None,
        );
        let _ = app.kubectl_output(
            &["-n", &mixed, "create", "-f", "-"],
            Some(&routed.to_string()),
        );
        assert!(Instant::now() < deadline, "x never went to west");
        std::thread::sleep(Duration::from_millis(300));
    }
    two.create(&mixed, "y");
    assert!(two.stored_east().contains(&two.at_east(&mixed, "y")));
    assert!(!two.stored_east().contains(&two.at_east(&mixed, "x")));
    assert_eq!(listed_in(app, &mixed), ["x", "y"]);
    two.patch(&mixed, "x", r#"{"spec":{"size":7}}"#);
    let size = app.kubectl(&[
        "-n",
        &mixed,
        "get",
        PLURAL,
        "x",
        "-o",
        "jsonpath={.spec.size}",
    ]);
    assert_eq!(size, "7");
    let moved = app.kubectl_output(
        &[
            "-n",
            &mixed,
            "annotate",
            PLURAL,
            "x",
            "bindery.dev/provider=east",
            "--overwrite",
        ],
        None,
    );
    assert!(!moved.status.success(), "x stays at west");
    let said = String::from_utf8_lossy(&moved.stderr);
    assert!(
        said.contains("an object does not change provider"),
        "{said}"
    );
    app.kubectl(&["-n", &mixed, "delete", PLURAL, "x"]);
    assert!(!two.stored_west().contains(&two.at_west(&mixed, "x")));
    assert_eq!(listed_in(app, &mixed), ["y"]);

    // team_east moves to west, losing no object or field; a watch across
    // namespaces that saw east's objects ends with 410, to list again.
    two.patch(team_east, "a", r#"{"metadata":{"labels":{"tier":"gold"},"annotations":{"note":"kept"}},"status":{"phase":"Ready"}}"#);
    let fields = |name: &str| {
        let object = app.kubectl(&["-n", team_east, "get", PLURAL, name, "-o", "json"]);
        let object: serde_json::Value = serde_json::from_str(&object).expect("an object");
        let metadata = &object["metadata"];
        serde_json::json!([
            metadata["labels"],
            metadata["annotations"],
            object["spec"],
            object["status"]
        ])
    };
    let before = (fields("a"), fields("d"));
    let events = runtime.block_on(async {
        let client = app.client().await;
        let all: Api<DynamicObject> = Api::all_with(client, &gadgets());
        let version = all
            .list(&ListParams::default())
            .await
            .expect("a list")
            .metadata
            .resource_version
            .expect("a version");
        all.watch(&WatchParams::default().timeout(60), &version)
            .await
            .expect("a watch across providers")
    });
    let ended = runtime.spawn(async move {
        futures::pin_mut!(events);
        while let Some(event) = events.next().await {
            if let Ok(WatchEvent::Error(status)) = event {
                return Some(status.code);
            }
        }
        None
    });
    two.move_namespace(team_east, "west");
    let code = runtime
        .block_on(async { tokio::time::timeout(Duration::from_secs(20), ended).await })
        .expect("the watch ended within 20 s")
        .expect("the watch task");
    assert_eq!(code, Some(410), "the watch across namespaces ends with 410");
    assert_eq!((fields("a"), fields("d")), before, "moved with every field");
    let east_stored = two.stored_east();
    assert!(
        !east_stored
            .iter()
            .any(|s| s.contains(&format!("-{team_east}/"))),
        "nothing left at east: {east_stored:?}"
    );
    let west_stored = two.stored_west();
    for name in ["a", "d"] {
        assert!(
            west_stored.contains(&two.at_west(team_east, name)),
            "{west_stored:?}"
        );
    }
    two.patch(team_east, "a", r#"{"spec":{"size":3}}"#);
    assert_eq!(fields("a")[2]["size"], 3, "written at west now");

    // One schema: a provider that serves the resource otherwise (here west's
    // bound schema made cluster-scoped) is refused when the router starts,
    // saying what breaks; the running router refuses its requests until
    // its schema is compatible again, and the default's namespaces go on.
    let west_scope = |scope: &str| {
        two.west_cluster.kubectl(&[
            "-n",
            &two.west.cluster_namespace,
            "patch",
            "boundschema",
            &format!("{PLURAL}.{GROUP}"),
            "--type=merge",
            "-p",
            &format!(r#"{{"spec":{{"scope":"{scope}"}}}}"#),
        ])
    };
    let at_east = format!("{}-still", two.team_east);
    app.kubectl(&["create", "namespace", &at_east]);
    two.create(&at_east, "s");
    west_scope("Cluster");
    let west_read = || app.kubectl_output(&["-n", &two.team_west, "get", PLURAL], None);
    wait_for(
        "the running router refused west for its schema",
        Duration::from_secs(30),
        || {
            String::from_utf8_lossy(&west_read().stderr).contains(&format!(
                "the provider west is not used: its schema is not compatible with the default provider's: west serves {PLURAL}.{GROUP} otherwise"
            ))
        },
    );
    assert_eq!(listed_in(app, &at_east), ["s"], "east's namespaces go on");
    let across = app.kubectl_output(&["get", PLURAL, "-A"], None);
    assert!(
        !across.status.success(),
        "a list across namespaces cannot leave west out"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let refused = loop {
        let providers = [("east", &two.east), ("west", &two.west)];
        if let Some(refused) = refusal(app, &providers, "east") {
            break refused;
        }
        assert!(
            Instant::now() < deadline,
            "a router across both still starts"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(
        refused.contains(&format!("west serves {PLURAL}.{GROUP} otherwise")),
        "{refused}"
    );
    // Both are told in the app cluster, as Events on the APIService.
    for reason in ["ProviderHeld", "ProviderSchemaIncompatible"] {
        let told = app.kubectl(&[
            "get",
            "events",
            "-n",
            "default",
            "--field-selector",
            &format!("reason={reason},involvedObject.name=v1.{GROUP}"),
            "-o",
            "jsonpath={.items[*].message}",
        ]);
        assert!(
            told.contains(&format!("west serves {PLURAL}.{GROUP} otherwise")),
            "{reason}: {told:?}"
        );
    }
    west_scope("Namespaced");
    wait_for(
        "the running router served west again",
        Duration::from_secs(30),
        || west_read().status.success(),
    );
}

/// The gadgets' API resource.
fn gadgets() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, "v1", "Gadget"), PLURAL)
}

/// The next ADDED event's object.
async fn next_added(
    events: &mut (impl futures::Stream<Item = kube::Result<WatchEvent<DynamicObject>>> + Unpin),
) -> DynamicObject {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let event = tokio::time::timeout_at(deadline, events.next())
            .await
            .expect("an event within 15 s")
            .expect("the watch goes on")
            .expect("an event");
        if let WatchEvent::Added(object) = event {
            return object;
        }
    }
}

/// The gadgets `namespace` of the app cluster shows, by name.
fn listed_in(app: &Cluster, namespace: &str) -> Vec<String> {
    let listed = app.kubectl(&[
        "-n",
        namespace,
        "get",
        PLURAL,
        "-o",
        "jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{end}",
    ]);
    listed.lines().map(str::to_string).collect()
}

/// Waits until `done` holds, or fails saying `what`.
fn wait_for(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < deadline, "{what} within {within:?}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn the_app_clusters_controllers_and_informers_work_across_both_providers() {
    let two = TwoProviders::new("routed-ctl");
    let (app, team_east, team_west) = (&two.app, two.team_east.as_str(), two.team_west.as_str());
    two.create(team_east, "a");
    two.create(team_west, "b");
    // client-go's dynamic and metadata informers across namespaces, with
    // the watch-list as the app cluster's controllers run it, and with a
    // list and then a watch.
    let informers = [true, false].map(|watch_list| {
        crate::a_soak::GoInformers::start_for(app, GROUP, PLURAL, "", watch_list)
    });
    two.create(team_west, "c");
    two.create(team_east, "d");
    two.patch(team_west, "c", r#"{"spec":{"size":2}}"#);
    app.kubectl(&["-n", team_east, "delete", PLURAL, "d"]);

    // The garbage collector: a gadget owned by a ConfigMap of west's
    // namespace goes with it (the collector watches gadgets across
    // namespaces, and deletes at west).
    app.kubectl(&["-n", team_west, "create", "configmap", "keeper"]);
    let uid = app.kubectl(&[
        "-n",
        team_west,
        "get",
        "configmap",
        "keeper",
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    let mut kept = gadget("kept");
    kept["metadata"]["ownerReferences"] = serde_json::json!([
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "keeper", "uid": uid}
    ]);
    app.kubectl_with_stdin(
        &["-n", team_west, "create", "-f", "-"],
        Some(&kept.to_string()),
    );
    assert!(two.stored_west().contains(&two.at_west(team_west, "kept")));
    app.kubectl(&["-n", team_west, "delete", "configmap", "keeper"]);
    wait_for(
        "the garbage collector deleted kept at west",
        Duration::from_secs(90),
        || !two.stored_west().contains(&two.at_west(team_west, "kept")),
    );

    // Namespace deletion: east's namespace finishes, its gadget gone at east.
    app.kubectl(&["delete", "namespace", team_east, "--wait=false"]);
    wait_for(
        "the namespace controller deleted the namespace",
        Duration::from_secs(90),
        || {
            !app.kubectl_output(&["get", "namespace", team_east], None)
                .status
                .success()
        },
    );
    assert!(
        !two.stored_east().contains(&two.at_east(team_east, "a")),
        "{:?}",
        two.stored_east()
    );

    // The informers saw every change once, in order, and hold exactly what
    // both providers hold.
    let expected = ["b", "c"];
    wait_for("the informers caught up", Duration::from_secs(30), || {
        informers
            .iter()
            .flat_map(|i| i.histories().into_values())
            .all(|(history, _, _)| {
                history
                    .get("a")
                    .is_some_and(|changes| changes.last().is_some_and(|c| c.0 == "delete"))
                    && history
                        .get("kept")
                        .is_some_and(|changes| changes.last().is_some_and(|c| c.0 == "delete"))
            })
    });
    let histories = informers
        .iter()
        .zip(["watch-list", "list and watch"])
        .flat_map(|(i, how)| {
            i.histories()
                .into_iter()
                .map(move |(informer, seen)| (format!("{informer} ({how})"), seen))
        });
    for (informer, (history, replays, tombstones)) in histories {
        assert_eq!(
            (replays, tombstones),
            (0, 0),
            "{informer} listed again: {history:?}"
        );
        let kinds = |name: &str| -> Vec<String> {
            history
                .get(name)
                .into_iter()
                .flatten()
                .map(|change| change.0.clone())
                .collect()
        };
        assert_eq!(kinds("c"), ["add", "update"], "{informer}: {history:?}");
        assert_eq!(kinds("d"), ["add", "delete"], "{informer}: {history:?}");
        assert_eq!(kinds("b"), ["add"], "{informer}: {history:?}");
    }
    for (informer, store) in informers.into_iter().flat_map(|i| i.finish()) {
        let names: Vec<&str> = store.keys().map(String::as_str).collect();
        assert_eq!(names, expected, "{informer}");
    }

    // A controller-runtime controller across both providers: its cache
    // lists and watches across namespaces, and it updates each object with
    // the version its cache holds (a merged one, from its watch).
    let other_east = format!("{team_east}-cr");
    app.kubectl(&["create", "namespace", &other_east]);
    two.create(&other_east, "f");
    let controller = GoController::start(app);
    let annotated = |namespace: &str, name: &str| {
        app.kubectl(&[
            "-n",
            namespace,
            "get",
            PLURAL,
            name,
            "-o",
            "jsonpath={.metadata.annotations.reconciled-size}",
        ])
    };
    for (namespace, name, size) in [
        (team_west, "b", "1"),
        (team_west, "c", "2"),
        (other_east.as_str(), "f", "1"),
    ] {
        wait_for(
            &format!("the controller annotated {namespace}/{name}"),
            Duration::from_secs(60),
            || annotated(namespace, name) == size,
        );
    }
    two.patch(&other_east, "f", r#"{"spec":{"size":5}}"#);
    wait_for(
        "the controller followed f's change",
        Duration::from_secs(30),
        || annotated(&other_east, "f") == "5",
    );
    drop(controller);

    // Quota: the app cluster's quota controller counts each namespace's
    // gadgets at its provider, and each provider's bindery charges a create
    // routed to it and refuses the one over the limit.
    two.register_app_cluster();
    let quota = |namespace: &str, hard: u32| {
        let quota = serde_json::json!({"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": "gadgets", "namespace": namespace},
            "spec": {"hard": {COUNTED: hard.to_string()}}});
        app.kubectl_with_stdin(&["apply", "-f", "-"], Some(&quota.to_string()));
    };
    let used = |namespace: &str| {
        let quota: serde_json::Value = serde_json::from_str(&app.kubectl(&[
            "-n",
            namespace,
            "get",
            "resourcequota",
            "gadgets",
            "-o",
            "json",
        ]))
        .expect("kubectl prints JSON");
        quota["status"]["used"][COUNTED]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    quota(team_west, 3);
    quota(&other_east, 1);
    for (namespace, count) in [(team_west, "2"), (other_east.as_str(), "1")] {
        wait_for(
            &format!("the quota controller counted {count} gadgets in {namespace}"),
            Duration::from_secs(120),
            || used(namespace) == count,
        );
    }
    two.create(team_west, "g");
    assert_eq!(
        used(team_west),
        "3",
        "west's bindery charged the create of g"
    );
    for (namespace, name) in [(team_west, "h"), (other_east.as_str(), "i")] {
        let refused = app.kubectl_output(
            &["-n", namespace, "create", "-f", "-"],
            Some(&gadget(name).to_string()),
        );
        let said = String::from_utf8_lossy(&refused.stderr);
        assert!(
            !refused.status.success() && said.contains("exceeded quota: gadgets"),
            "a create over {namespace}'s quota: {said}"
        );
    }
    assert!(!two.stored_west().contains(&two.at_west(team_west, "h")));
    assert!(!two.stored_east().contains(&two.at_east(&other_east, "i")));
    app.kubectl(&["-n", team_west, "delete", PLURAL, "g"]);
    wait_for(
        "the quota controller counted the deletion at west",
        Duration::from_secs(60),
        || used(team_west) == "2",
    );

    // A provider that is down fails its own namespaces only; discovery
    // (the default provider's) goes on.
    let mut west_bindery = two.west_bindery;
    west_bindery.terminate();
    wait_for("west's bindery stopped", Duration::from_secs(30), || {
        west_bindery.exited()
    });
    let failed = app.kubectl_output(&["-n", team_west, "get", PLURAL], None);
    assert!(!failed.status.success(), "west is down");
    let said = String::from_utf8_lossy(&failed.stderr);
    assert!(
        said.contains("the provider west cannot be reached"),
        "{said}"
    );
    let open = format!("{team_east}-other");
    app.kubectl(&["create", "namespace", &open]);
    app.kubectl_with_stdin(
        &["-n", &open, "create", "-f", "-"],
        Some(&gadget("e").to_string()),
    );
    assert_eq!(listed_in(app, &open), ["e"]);
    let resources = app.kubectl(&["api-resources", "--api-group", GROUP]);
    assert!(resources.contains(PLURAL), "{resources}");
}

/// The controller-runtime controller of `tests/clients/gadget-controller`
/// across every namespace of an app cluster; stopped when dropped.
struct GoController {
    child: std::process::Child,
}

impl GoController {
    fn start(app: &Cluster) -> Self {
        let binary = crate::a_soak::go_runner::build_from(
            "tests/clients",
            "gadget-controller",
            "sigs.k8s.io/controller-runtime v0.22.4 from the Go module proxy or cache",
        );
        let log = crate::fixture::scratch_dir().join(crate::fixture::unique_name("controller.log"));
        let child = std::process::Command::new(binary)
            .arg("--app-kubeconfig")
            .arg(&app.kubeconfig)
            .args(["--group", GROUP, "--version", "v1", "--kind", "Gadget"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).expect("a log file"))
            .spawn()
            .expect("the controller starts");
        Self { child }
    }
}

impl Drop for GoController {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
