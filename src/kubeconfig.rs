//! Kubeconfigs for consumers of the direct endpoint `/clusters/<consumer>`:
//! bindery's serving CA, the consumer's client certificate, and the server URL
//! with the consumer's path. Pure text building.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// A kubeconfig for `consumer` at `server` (bindery's base URL).
pub fn consumer_kubeconfig(
    server: &str,
    consumer: &str,
    ca_pem: &[u8],
    cert_pem: &[u8],
    key_pem: &[u8],
) -> String {
    let server = format!("{}/clusters/{consumer}", server.trim_end_matches('/'));
    let value = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "bindery", "cluster": {
            "server": server,
            "certificate-authority-data": STANDARD.encode(ca_pem),
        }}],
        "users": [{"name": consumer, "user": {
            "client-certificate-data": STANDARD.encode(cert_pem),
            "client-key-data": STANDARD.encode(key_pem),
        }}],
        "contexts": [{"name": consumer, "context": {"cluster": "bindery", "user": consumer}}],
        "current-context": consumer,
    });
    serde_norway::to_string(&value).expect("a kubeconfig serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_carries_the_consumer_path() {
        let text = consumer_kubeconfig("https://127.0.0.1:8443/", "c1", b"ca", b"cert", b"key");
        let value: serde_json::Value = serde_norway::from_str(&text).unwrap();
        assert_eq!(
            value["clusters"][0]["cluster"]["server"],
            "https://127.0.0.1:8443/clusters/c1"
        );
        assert_eq!(
            value["users"][0]["user"]["client-key-data"],
            STANDARD.encode("key")
        );
        assert_eq!(value["current-context"], "c1");
    }
}
