//! What a Table of 500 objects costs bindery to render from the watch
//! cache's consumer-form list (`bindery::table`): decoding the list, making
//! the rows (cells and row objects), and encoding the Table, for each
//! `includeObject`; the Table joined from rows the cache keeps; and the
//! gzip of the Table and the list, as kubectl asks for them. Pure:
//! no cluster. Results and the command are in `benches/RESULTS.md`.

use bindery::server::compress::gzip;
use bindery::table::{Columns, table, table_of_rows};
use bindery::wire::query::IncludeObject;
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use std::hint::black_box;

/// A list as the cache gives it: 500 objects of about 1.2 KiB (the
/// `kubectl_paths` bench's objects, with their managed fields).
fn list() -> Vec<u8> {
    let filler = "x".repeat(400);
    let items: Vec<serde_json::Value> = (0..500)
        .map(|i| {
            serde_json::json!({
                "apiVersion": "db.example.com/v1", "kind": "PostgreSQLInstance",
                "metadata": {
                    "annotations": {"bench.bindery.dev/filler": filler},
                    "creationTimestamp": "2026-11-26T18:00:00Z", "generation": 1,
                    "labels": {"app": "bench", "tier": "data"},
                    "managedFields": [{"apiVersion": "db.example.com/v1", "fieldsType": "FieldsV1",
                        "fieldsV1": {"f:metadata": {"f:annotations": {".": {}, "f:bench.bindery.dev/filler": {}},
                            "f:labels": {".": {}, "f:app": {}, "f:tier": {}}},
                            "f:spec": {".": {}, "f:plan": {}, "f:version": {},
                                "f:writeConnectionSecretToRef": {".": {}, "f:name": {}}}},
                        "manager": "kubectl", "operation": "Update", "time": "2026-11-26T18:00:00Z"}],
                    "name": format!("bench-{i:04}"), "namespace": "bench",
                    "resourceVersion": format!("{}", 1000 + i),
                    "uid": format!("0f0e0d0c-0b0a-4908-8706-0504030201{i:02}"),
                },
                "spec": {"plan": "small", "version": "16",
                    "writeConnectionSecretToRef": {"name": format!("bench-{i:04}-conn")}},
                "status": {"phase": "Ready"},
            })
        })
        .collect();
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "db.example.com/v1", "kind": "PostgreSQLInstanceList",
        "metadata": {"resourceVersion": "2000"}, "items": items,
    }))
    .expect("a list")
}

fn columns() -> Columns {
    let spec = serde_json::from_value(serde_json::json!({
        "group": "db.example.com", "names": {"plural": "postgresqlinstances", "kind": "PostgreSQLInstance"},
        "scope": "Namespaced",
        "versions": [{"name": "v1", "served": true, "storage": true, "additionalPrinterColumns": [
            {"name": "Plan", "type": "string", "jsonPath": ".spec.plan"},
            {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]}],
    }))
    .expect("a CRD spec");
    Columns::of(&spec, "v1").expect("columns")
}

fn bench(c: &mut Criterion) {
    let list = list();
    let columns = columns();
    let now = std::time::SystemTime::now();
    let mut group = c.benchmark_group("table_render_500");
    group.bench_function("decode the list", |b| {
        b.iter(|| black_box(serde_json::from_slice::<serde_json::Value>(&list).unwrap()))
    });
    for (name, include) in [
        ("Metadata", IncludeObject::Metadata),
        ("None", IncludeObject::None),
        ("Object", IncludeObject::Object),
    ] {
        group.bench_with_input(
            BenchmarkId::new("the Table from the list's bytes", name),
            &include,
            |b, include| b.iter(|| black_box(table(&columns, &list, *include, now).unwrap())),
        );
    }
    // What a Table costs when the cache keeps each object's row (made once
    // per change): the rows joined, and their ages written.
    let parsed: serde_json::Value = serde_json::from_slice(&list).unwrap();
    let metadata = parsed["metadata"].as_object().unwrap().clone();
    let rows: Vec<_> = parsed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| {
            columns
                .row_of(&item.to_string(), IncludeObject::Metadata)
                .unwrap()
        })
        .collect();
    group.bench_function("the Table from kept rows/Metadata", |b| {
        b.iter(|| black_box(table_of_rows(&columns, &metadata, &rows, now).unwrap()))
    });
    // What kubectl's `Accept-Encoding: gzip` adds: the Table (and the plain
    // list) compressed as bindery answers them.
    let kept = table_of_rows(&columns, &metadata, &rows, now).unwrap();
    for (name, body) in [("Table", &kept[..]), ("list", &list[..])] {
        group.bench_with_input(BenchmarkId::new("gzip", name), body, |b, body| {
            b.iter(|| black_box(gzip(body)))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
