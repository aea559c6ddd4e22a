//! Serialized documents and their entity tags. kube-apiserver tags aggregated
//! discovery, `/openapi/v2` and `/openapi/v3/apis/<g>/<v>` with the upper-case
//! hex SHA-512 of the body, quoted, and answers a matching `If-None-Match`
//! with 304; the OpenAPI v3 root links each group-version with that hash in
//! `?hash=`. The hash must be of the very bytes served, so serve
//! [`Document::body`] as is.

use ring::digest;
use serde_json::Value;

/// A document serialized for serving, with its entity tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    /// The JSON body.
    pub body: Vec<u8>,
    /// Upper-case hex SHA-512 of `body`: the `?hash=` of the v3 root.
    pub hash: String,
    /// `hash` in double quotes: the `ETag` header value.
    pub etag: String,
}

impl Document {
    /// Serializes `value` compactly and tags it.
    pub fn new(value: &Value) -> Self {
        // Serializing a Value cannot fail: its map keys are strings.
        let body = serde_json::to_vec(value).unwrap_or_default();
        let hash = hash(&body);
        let etag = format!("\"{hash}\"");
        Document { body, hash, etag }
    }

    /// Whether an `If-None-Match` header value names this document, as
    /// kube-apiserver checks it (the whole header equals the quoted tag).
    pub fn matches(&self, if_none_match: &str) -> bool {
        if_none_match == self.etag
    }
}

/// Upper-case hex SHA-512 of `body`.
pub fn hash(body: &[u8]) -> String {
    let d = digest::digest(&digest::SHA512, body);
    let mut out = String::with_capacity(128);
    for b in d.as_ref() {
        out.push_str(&format!("{b:02X}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_upper_hex_sha512() {
        // sha512("abc"), FIPS 180-2 example.
        assert_eq!(
            hash(b"abc"),
            "DDAF35A193617ABACC417349AE20413112E6FA4E89A97EA20A9EEEE64B55D39A\
             2192992A274FC1A836BA3C23A3FEEBBD454D4423643CE80E2A9AC94FA54CA49F"
        );
    }

    #[test]
    fn document_tags_its_body() {
        let doc = Document::new(&serde_json::json!({"a": [1, "x"]}));
        assert_eq!(doc.body, br#"{"a":[1,"x"]}"#);
        assert_eq!(doc.hash, hash(br#"{"a":[1,"x"]}"#));
        assert_eq!(doc.etag, format!("\"{}\"", doc.hash));
        assert!(doc.matches(&doc.etag));
        assert!(!doc.matches(&doc.hash));
        assert_ne!(Document::new(&serde_json::json!({"a": [1]})).etag, doc.etag);
    }
}
