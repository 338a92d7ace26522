//! The assignor registry: an upload stored once and listed with the
//! built-ins, bad uploads naming what failed and storing nothing, and a
//! group running on an uploaded module that cannot be deleted while bound.

use super::*;

impl Fixture {
    /// Uploads `bytes` as `name@version` with the given content type.
    async fn upload_as(
        &self,
        query: &str,
        content_type: &str,
        bytes: impl Into<Body>,
    ) -> (StatusCode, Value) {
        let request = Request::builder()
            .method("POST")
            .uri(format!("/v1/assignors?{query}"))
            .header(header::CONTENT_TYPE, content_type)
            .body(bytes.into())
            .unwrap();
        let (status, value, _) = self.send(request).await;
        (status, value)
    }

    pub(super) async fn upload(
        &self,
        name: &str,
        version: &str,
        bytes: &[u8],
    ) -> (StatusCode, Value) {
        self.upload_as(
            &format!("name={name}&version={version}"),
            "application/wasm",
            bytes.to_vec(),
        )
        .await
    }

    pub(super) async fn assignor_count(&self) -> usize {
        let (status, list) = self.call("GET", "/v1/assignors", None).await;
        assert_eq!(status, StatusCode::OK, "{list}");
        list["assignors"].as_array().unwrap().len()
    }
}

pub(super) fn sticky_bytes() -> &'static [u8] {
    crate::plugins::builtin_component("sticky").unwrap()
}

/// `component` with a custom section named `padding` of `payload_len`
/// zero bytes appended: the same component, other bytes.
fn with_custom_section(component: &[u8], payload_len: usize) -> Vec<u8> {
    let mut padded = component.to_vec();
    let name = b"padding";
    let section_len = 1 + name.len() + payload_len;
    padded.push(0); // custom section
    let mut len = section_len;
    loop {
        let byte = (len & 0x7f) as u8;
        len >>= 7;
        padded.push(if len == 0 { byte } else { byte | 0x80 });
        if len == 0 {
            break;
        }
    }
    padded.push(name.len() as u8);
    padded.extend_from_slice(name);
    padded.resize(padded.len() + payload_len, 0);
    padded
}

#[tokio::test]
async fn an_upload_is_stored_once_and_listed_with_the_builtins() {
    let f = fixture();
    assert_eq!(f.assignor_count().await, 4, "the built-ins");
    let (status, module) = f.upload("mine", "1.0", sticky_bytes()).await;
    assert_eq!(status, StatusCode::CREATED, "{module}");
    let id = module["id"].as_str().unwrap().to_owned();
    assert_eq!(id.len(), 64, "sha256 hex: {id}");
    assert_eq!(module["name"], "mine");
    assert_eq!(module["version"], "1.0");
    assert_eq!(module["builtin"], false);
    assert_eq!(module["info"]["name"], "sticky");
    assert_eq!(module["size_bytes"], sticky_bytes().len());

    // The same bytes again: the same module, nothing new.
    let (status, again) = f.upload("other", "2", sticky_bytes()).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again, module);
    assert_eq!(f.assignor_count().await, 5);

    // Past the 1 MiB of the other routes: the same component with a 2 MiB
    // custom section appended is another module, and is accepted.
    let padded = with_custom_section(sticky_bytes(), 2usize << 20);
    let (status, big) = f.upload("padded", "1", &padded).await;
    assert_eq!(status, StatusCode::CREATED, "{big}");
    assert_eq!(big["size_bytes"], padded.len());
    let (status, _) = f.call("DELETE", "/v1/assignors/padded@1", None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);

    // Other bytes under a taken name and version.
    let range = crate::plugins::builtin_component("range").unwrap();
    let answer = f.upload("mine", "1.0", range).await;
    assert_error(&answer, StatusCode::CONFLICT, "module_name_taken");

    let (_, list) = f.call("GET", "/v1/assignors", None).await;
    let list = list["assignors"].as_array().unwrap().clone();
    let names: Vec<_> = list.iter().map(|a| a["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["range", "round-robin", "sticky", "learner-aware", "mine"]
    );
    assert!(list[..4].iter().all(|a| a["builtin"] == true));
    assert_eq!(
        list[2]["id"], id,
        "a built-in's id is the sha256 of its bytes"
    );

    for reference in [id.as_str(), "mine@1.0"] {
        let (status, shown) = f
            .call("GET", &format!("/v1/assignors/{reference}"), None)
            .await;
        assert_eq!(status, StatusCode::OK, "{shown}");
        assert_eq!(shown, module);
    }
    let (status, shown) = f.call("GET", "/v1/assignors/range", None).await;
    assert_eq!(status, StatusCode::OK, "{shown}");
    assert_eq!(shown["builtin"], true);
    assert_eq!(shown["info"]["name"], "range");
    let answer = f.call("GET", "/v1/assignors/mine@2.0", None).await;
    assert_error(&answer, StatusCode::NOT_FOUND, "unknown_module");
}

#[tokio::test]
async fn bad_uploads_name_what_failed_and_store_nothing() {
    let f = fixture();
    let bytes = sticky_bytes();
    let core_module = wat::parse_str("(module)").unwrap();
    let cases: Vec<(Vec<u8>, StatusCode, &str)> = vec![
        (
            b"not wasm at all".to_vec(),
            StatusCode::BAD_REQUEST,
            "not_wasm",
        ),
        (Vec::new(), StatusCode::BAD_REQUEST, "not_wasm"),
        (core_module, StatusCode::BAD_REQUEST, "core_module"),
        (
            bytes[..bytes.len() / 2].to_vec(),
            StatusCode::BAD_REQUEST,
            "compile_failed",
        ),
    ];
    for (body, status, code) in cases {
        let answer = f.upload("bad", "1", &body).await;
        assert_error(&answer, status, code);
    }
    let answer = f
        .upload_as("name=x&version=1", "application/json", bytes.to_vec())
        .await;
    assert_error(
        &answer,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
    );
    let answer = f
        .upload_as("version=1", "application/octet-stream", bytes.to_vec())
        .await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_query");
    let answer = f.upload("a%40b", "1", bytes).await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_module_name");
    // Over the module cap, 48 MiB (the other routes keep their 1 MiB).
    let huge = vec![0u8; crate::registry::MODULE_UPLOAD_BYTES_MAX + 1];
    let answer = f.upload("huge", "1", &huge).await;
    assert_error(&answer, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
    // A body whose length is not declared is cut at the limit as well.
    let stream = futures_body(huge);
    let answer = f
        .upload_as("name=huge&version=1", "application/wasm", stream)
        .await;
    assert_error(&answer, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
    assert_eq!(f.assignor_count().await, 4, "nothing stored");
}

/// A body without a declared length: chunks of 1 MiB.
fn futures_body(bytes: Vec<u8>) -> Body {
    struct Chunks(Vec<axum::body::Bytes>);
    impl http_body::Body for Chunks {
        type Data = axum::body::Bytes;
        type Error = std::io::Error;
        fn poll_frame(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
            let next = (!self.0.is_empty()).then(|| Ok(http_body::Frame::data(self.0.remove(0))));
            std::task::Poll::Ready(next)
        }
    }
    let chunks = bytes
        .chunks(1 << 20)
        .map(axum::body::Bytes::copy_from_slice)
        .collect();
    Body::new(Chunks(chunks))
}

#[tokio::test]
async fn a_group_runs_on_an_uploaded_module_which_cannot_be_deleted_while_bound() {
    let f = fixture();
    let (status, module) = f.upload("mine", "1.0", sticky_bytes()).await;
    assert_eq!(status, StatusCode::CREATED, "{module}");
    let id = module["id"].as_str().unwrap().to_owned();

    let mut config = config_json(6);
    config["assignor"] = json!("mine@1.0");
    let (status, view) = f.put_group(config.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{view}");
    let a = f.join("worker-a").await;
    let b = f.join("worker-b").await;
    f.assign().await;
    let a = f.beat(&a).await;
    let b = f.beat(&b).await;
    assert_eq!((a.active.len(), b.active.len()), (3, 3), "{a:?} {b:?}");

    for reference in [id.as_str(), "mine@1.0"] {
        let answer = f
            .call("DELETE", &format!("/v1/assignors/{reference}"), None)
            .await;
        assert_error(&answer, StatusCode::CONFLICT, "module_in_use");
    }
    // Bound by id instead: still in use.
    config["assignor"] = json!(id);
    let (status, _) = f.put_group(config.clone()).await;
    assert_eq!(status, StatusCode::OK);
    let answer = f.call("DELETE", "/v1/assignors/mine@1.0", None).await;
    assert_error(&answer, StatusCode::CONFLICT, "module_in_use");

    config["assignor"] = json!("sticky");
    let (status, _) = f.put_group(config.clone()).await;
    assert_eq!(status, StatusCode::OK);
    let before = f.record_count();
    let (status, body) = f.call("DELETE", "/v1/assignors/mine@1.0", None).await;
    assert_eq!((status, body), (StatusCode::NO_CONTENT, Value::Null));
    assert_eq!(f.record_count(), before, "a delete writes no record");
    let answer = f.call("GET", &format!("/v1/assignors/{id}"), None).await;
    assert_error(&answer, StatusCode::NOT_FOUND, "unknown_module");
    let answer = f.call("DELETE", &format!("/v1/assignors/{id}"), None).await;
    assert_error(&answer, StatusCode::NOT_FOUND, "unknown_module");
    let answer = f.call("DELETE", "/v1/assignors/sticky", None).await;
    assert_error(&answer, StatusCode::CONFLICT, "builtin_assignor");

    // The deleted module can no longer be bound.
    config["assignor"] = json!(id);
    let answer = f.put_group(config).await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "unknown_assignor");
    f.assert_replay_matches().await;
}
