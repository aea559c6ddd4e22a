//! What the benchmarks share: a consumer of the conformance Widgets CRD on
//! the test fixture's clusters and bindery (each benchmark includes those
//! as `crate::fixture` and `crate::bindery`).

use crate::{bindery, fixture};
use kube::api::{Api, ApiResource, DynamicObject};

/// The provider CRD both benchmarks read.
pub const CRD: &str = "widgets.conformance.bindery.dev";

/// Installs the conformance CRDs in the provider and sets up consumer `id`
/// with the Widgets exported as `widgets`.
pub fn widgets_consumer(id: &str) -> bindery::Consumer {
    let provider = &fixture::clusters().provider;
    provider.kubectl(&[
        "apply",
        "-f",
        &fixture::repo_root()
            .join("conformance/crds")
            .to_string_lossy(),
    ]);
    provider.kubectl(&[
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        &format!("crd/{CRD}"),
    ]);
    bindery::bindery().consumer(id, CRD, "widgets")
}

/// The Widgets of `namespace`, read with `client`.
#[allow(dead_code)] // list_10k reads raw bytes instead
pub fn widgets(client: kube::Client, namespace: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("conformance.bindery.dev", "v1", "Widget"),
        "widgets",
    );
    Api::namespaced_with(client, namespace, &resource)
}
