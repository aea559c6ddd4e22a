//! How an app cluster's aggregation layer reaches bindery: each consumer's
//! app cluster has a Service `bindery-<consumer>` in namespace `kube-bind`
//! that its APIServices point at. The aggregator sends the Service's name,
//! `bindery-<consumer>.kube-bind.svc`, as the TLS server name, so the server
//! name tells bindery which consumer an aggregated request is for (and the
//! front-proxy CA registered for that consumer must then verify the
//! caller). One serving certificate for `*.kube-bind.svc` covers every
//! consumer. Pure.

use crate::route::ConsumerId;

/// The app cluster namespace of the Services APIServices point at.
pub const SERVICE_NAMESPACE: &str = "kube-bind";
const SERVICE_PREFIX: &str = "bindery-";

/// The serving certificate's name for every consumer's Service.
pub fn serving_dns_name() -> String {
    format!("*.{SERVICE_NAMESPACE}.svc")
}

/// The name of the Service for `consumer` in its app cluster.
pub fn service_name(consumer: &ConsumerId) -> String {
    format!("{SERVICE_PREFIX}{consumer}")
}

/// The consumer a TLS server name (`bindery-<consumer>.kube-bind.svc`)
/// names, if it is one of those.
pub fn consumer_of_server_name(server_name: &str) -> Option<ConsumerId> {
    let host = server_name
        .strip_suffix(".svc")?
        .strip_suffix(SERVICE_NAMESPACE)?
        .strip_suffix('.')?;
    ConsumerId::parse(host.strip_prefix(SERVICE_PREFIX)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_round_trip_and_strangers_name_nobody() {
        let consumer = ConsumerId::parse("3nxf5ph7e0v4z").unwrap();
        let server_name = format!("{}.{SERVICE_NAMESPACE}.svc", service_name(&consumer));
        assert_eq!(consumer_of_server_name(&server_name), Some(consumer));
        for stranger in [
            "bindery-abc.other.svc",
            "bindery-abc.kube-bind.svc.cluster.local",
            "abc.kube-bind.svc",
            "bindery-.kube-bind.svc",
            "bindery-ABC.kube-bind.svc",
            "bindery-a.b.kube-bind.svc",
            "localhost",
            "",
        ] {
            assert_eq!(consumer_of_server_name(stranger), None, "{stranger}");
        }
    }
}
