//! A provider's answer as the router takes it: passed back as it came (its
//! status, the headers a caller may see, its body), or read whole as the
//! list it must be.

use super::requests::is_json;
use crate::status::ApiError;
use crate::upstream::{BoxBody, BoxError};
use http::Response;
use http_body_util::{BodyExt, Limited};
use serde_json::Value;

/// The largest answer of one provider a merged list reads.
const LARGEST_LIST: usize = 1 << 30;

/// The answer headers the caller is given.
const FORWARDED_ANSWER_HEADERS: [&str; 6] = [
    "content-type",
    "content-encoding",
    "vary",
    "warning",
    "retry-after",
    "audit-id",
];

/// A provider's answer, as it came: its status, the headers a caller may
/// see, its body.
pub fn passed_back(response: Response<kube::client::Body>) -> Response<BoxBody> {
    let (head, body) = response.into_parts();
    let mut out = Response::new(body.map_err(|e| Box::new(e) as BoxError).boxed_unsync());
    *out.status_mut() = head.status;
    for name in FORWARDED_ANSWER_HEADERS {
        for value in head.headers.get_all(name) {
            out.headers_mut().append(name, value.clone());
        }
    }
    out
}

/// A provider's list answer (200), read whole.
pub async fn read_list(answer: Response<kube::client::Body>) -> Result<Value, ApiError> {
    if !is_json(answer.headers()) {
        return Err(crate::forward::answer::unreadable("a provider"));
    }
    let bytes = Limited::new(answer.into_body(), LARGEST_LIST)
        .collect()
        .await
        .map_err(|_| crate::forward::answer::unreadable("a provider"))?
        .to_bytes();
    crate::deep::from_slice(&bytes).map_err(|_| crate::forward::answer::unreadable("a provider"))
}
