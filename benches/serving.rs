//! GET and LIST through bindery against the same requests made directly to
//! the provider, side by side in one run, on the same real provider cluster
//! (started by the test fixture). Results and the command are recorded in
//! `benches/RESULTS.md`; read the two lines of each group as a ratio.

#[allow(dead_code)]
#[path = "../tests/e2e/bindery.rs"]
mod bindery;
#[allow(dead_code)]
#[path = "../tests/e2e/fixture.rs"]
mod fixture;

use criterion::{Criterion, criterion_group, criterion_main};
use fixture::{clusters, repo_root};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};

const CRD: &str = "widgets.conformance.bindery.dev";
const OBJECTS: usize = 200;

fn widgets(client: kube::Client, namespace: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("conformance.bindery.dev", "v1", "Widget"),
        "widgets",
    );
    Api::namespaced_with(client, namespace, &resource)
}

fn serving(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let provider = &clusters().provider;
    provider.kubectl(&[
        "apply",
        "-f",
        &repo_root().join("conformance/crds").to_string_lossy(),
    ]);
    provider.kubectl(&[
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        &format!("crd/{CRD}"),
    ]);
    let consumer = bindery::bindery().consumer("bench", CRD, "widgets");
    let (direct, through) = runtime.block_on(async {
        let direct = widgets(provider.client().await, "kube-bind-bench-load");
        let through = widgets(consumer.client().await, "load");
        for i in 0..OBJECTS {
            let object: DynamicObject = serde_json::from_value(serde_json::json!({
                "apiVersion": "conformance.bindery.dev/v1", "kind": "Widget",
                "metadata": {"name": format!("w-{i}")}, "spec": {"size": "small", "replicas": 1},
            }))
            .expect("a widget");
            // Through bindery, so that the objects carry the identity labels;
            // the direct requests read the very same objects.
            let _ = through.create(&PostParams::default(), &object).await;
        }
        (direct, through)
    });

    let mut get = c.benchmark_group("get");
    get.bench_function("direct", |b| {
        b.to_async(&runtime).iter(|| direct.get("w-1"))
    });
    get.bench_function("bindery", |b| {
        b.to_async(&runtime).iter(|| through.get("w-1"))
    });
    get.finish();

    let all = ListParams::default();
    let mut list = c.benchmark_group(format!("list-{OBJECTS}"));
    list.sample_size(30);
    list.bench_function("direct", |b| {
        b.to_async(&runtime).iter(|| direct.list(&all))
    });
    list.bench_function("bindery", |b| {
        b.to_async(&runtime).iter(|| through.list(&all))
    });
    list.finish();
}

criterion_group!(benches, serving);
criterion_main!(benches);
