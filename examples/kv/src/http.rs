//! What the worker and the router say on the wire alike: the error body
//! (`{"error": {"code", "message"}}`, assignd's own shape), the topic,
//! and a key as one path segment.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// The topic whose partitions hold the keys.
pub const TOPIC: &str = "kv";

/// A worker's answer for a key whose partition it does not serve now.
pub const NOT_OWNER: &str = "not_owner";

/// An error answer: `status` and `{"error": {"code", "message"}}`.
pub fn error(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    let body = serde_json::json!({"error": {"code": code, "message": message.into()}});
    (status, Json(body)).into_response()
}

/// A 503 that asks the client to come back in a second.
pub fn unavailable(code: &str, message: impl Into<String>) -> Response {
    let mut response = error(StatusCode::SERVICE_UNAVAILABLE, code, message);
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// `key` as one URL path segment: every byte outside RFC 3986's
/// unreserved characters percent-encoded.
pub fn path_segment(key: &str) -> String {
    let mut segment = String::with_capacity(key.len());
    for byte in key.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            segment.push(byte as char);
        } else {
            segment.push_str(&format!("%{byte:02X}"));
        }
    }
    segment
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_one_path_segment() {
        assert_eq!(path_segment("key-7"), "key-7");
        assert_eq!(path_segment("a/b c%"), "a%2Fb%20c%25");
        assert_eq!(path_segment("é"), "%C3%A9");
    }
}
