//! What a resource request pays to learn its binding: the catalog's view of
//! one resource for one consumer, and the key its translations are memoized
//! under, for consumers with few and with many namespaces. Pure: no
//! cluster. Results and the command are in `benches/RESULTS.md`.

use bindery::catalog::{Catalog, ExportRecord, NamespaceRecord, SchemaRecord};
use bindery::route::ConsumerId;
use bindery::translate::{IdentityHash, Isolation};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use std::sync::Arc;

/// One consumer with one export of widgets and `namespaces` namespace
/// records.
fn catalog(namespaces: usize) -> Catalog {
    let mut catalog = Catalog::new("kube-bind-");
    let spec = serde_json::from_value(serde_json::json!({"group": "example.com",
        "names": {"plural": "widgets", "kind": "Widget"}, "scope": "Namespaced",
        "versions": [{"name": "v1", "served": true, "storage": true}]}))
    .expect("a CRD spec");
    catalog.set_schemas([SchemaRecord {
        namespace: "kube-bind-c1".into(),
        name: "widgets.example.com".into(),
        spec: Arc::new(spec),
    }]);
    catalog.set_exports([ExportRecord {
        namespace: "kube-bind-c1".into(),
        name: "widgets".into(),
        resources: vec![("example.com".into(), "widgets".into())],
        isolation: Isolation::Prefixed,
        identity: Some(IdentityHash::of_secret(b"export")),
        created: "2026-11-25T00:00:00Z".into(),
        caps: bindery::quota::caps::Caps::DEFAULT,
    }]);
    catalog.set_namespaces((0..namespaces).map(|i| NamespaceRecord {
        namespace: "kube-bind-c1".into(),
        name: format!("team-{i}"),
        provider: Some(format!("kube-bind-c1-team-{i}")),
    }));
    catalog
}

fn binding_view(c: &mut Criterion) {
    let consumer = ConsumerId::parse("c1").expect("a consumer id");
    let mut group = c.benchmark_group("binding-view");
    for namespaces in [1, 100, 1_000] {
        let catalog = catalog(namespaces);
        group.bench_with_input(
            BenchmarkId::new("resource view + translation key", namespaces),
            &catalog,
            |b, catalog| {
                b.iter(|| {
                    let view = catalog.resource_view(&consumer, "example.com", "widgets");
                    black_box(view.resources[0].bound.translation_key())
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, binding_view);
criterion_main!(benches);
