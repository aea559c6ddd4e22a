//! The binding API's caller input: a `/bind/...` path and method as the
//! router and `BindRoute` read them, the JSON bodies of its routes, the
//! browser's form, and the app cluster's kubeconfig a registration carries
//! (`kubeconfig_check`). Read without a panic.

#![no_main]

use arbitrary::Arbitrary;
use bindery::bind::routes::BindRoute;
use bindery::bind::wire::{BindRequest, Registration, SessionState, UnbindRequest};
use bindery::route::Endpoint;
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Input<'a> {
    method: u8,
    path: &'a str,
    body: &'a [u8],
    kubeconfig: &'a str,
}

const METHODS: &[&str] = &["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"];

fuzz_target!(|input: Input<'_>| {
    let method =
        http::Method::from_bytes(METHODS[usize::from(input.method) % METHODS.len()].as_bytes())
            .expect("a method");
    let path = format!("/bind/{}", input.path);
    if let Endpoint::Bind(segments) = bindery::route::parse(&path) {
        let route = BindRoute::of(&method, &segments);
        let _ = route.credential();
        assert!(route.body_limit() > 0);
    }
    let _ = serde_json::from_slice::<BindRequest>(input.body);
    let _ = serde_json::from_slice::<UnbindRequest>(input.body);
    let _ = serde_json::from_slice::<Registration>(input.body);
    let _ = serde_json::from_slice::<SessionState>(input.body);
    let _ = bindery::percent::decode_query(input.path);
    let _ = bindery::bind::kubeconfig_check::check(input.kubeconfig);
});
