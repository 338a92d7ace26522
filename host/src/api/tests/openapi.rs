//! The OpenAPI document: it names every route, lists exactly the config
//! fields, is the document served, and says what the routes accept.

use super::*;

#[test]
fn the_openapi_document_names_every_route() {
    let doc = serde_json::to_value(openapi()).unwrap();
    let paths = doc["paths"].as_object().unwrap();
    for (path, method) in [
        ("/v1/groups/{group}/heartbeat", "post"),
        ("/v1/groups", "get"),
        ("/v1/groups/{group}", "put"),
        ("/v1/groups/{group}", "get"),
        ("/v1/groups/{group}/assignor-input", "get"),
        ("/v1/groups/{group}/members/{member}/drain", "post"),
        ("/v1/groups/{group}/assignor", "put"),
        ("/v1/groups/{group}/assignor/rollback", "post"),
        ("/v1/groups/{group}/assignor/preview", "post"),
        ("/v1/groups/{group}/shadow", "put"),
        ("/v1/groups/{group}/shadow", "delete"),
        ("/v1/groups/{group}/shadow", "get"),
        ("/v1/assignors", "post"),
        ("/v1/assignors", "get"),
        ("/v1/assignors/{assignor}", "get"),
        ("/v1/assignors/{assignor}", "delete"),
        ("/v1/openapi.json", "get"),
        ("/healthz", "get"),
        ("/metrics", "get"),
        ("/v1/shards", "get"),
        ("/v1/shards/{shard}/load", "post"),
        ("/v1/shards/{shard}/unload", "post"),
        ("/v1/groups/{group}/coordinator", "get"),
        ("/v1/groups/{group}/routes", "get"),
        ("/v1/groups/{group}/routes/lookup", "get"),
        ("/v1/token", "get"),
        ("/v1/rollouts", "post"),
        ("/v1/rollouts", "get"),
        ("/v1/rollouts/{id}", "get"),
        ("/v1/rollouts/{id}/pause", "post"),
        ("/v1/rollouts/{id}/resume", "post"),
        ("/v1/rollouts/{id}/abort", "post"),
    ] {
        let operation = &paths[path][method];
        assert!(operation.is_object(), "{method} {path} missing: {paths:?}");
        assert!(
            !operation["responses"].as_object().unwrap().is_empty(),
            "{method} {path}"
        );
    }
    assert_eq!(paths.len(), 26, "no route left out or added unnoticed");
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    for name in [
        "HeartbeatRequest",
        "HeartbeatResponseBody",
        "GroupConfigDoc",
        "GroupView",
        "GroupList",
        "ErrorBody",
        "Task",
        "LagRow",
        "AssignorView",
        "AssignorList",
        "BindRequest",
        "BindingView",
        "PreviewRequest",
        "PreviewView",
        "LoadItem",
        "LoadReport",
        "GroupLoadView",
        "MemberLoadView",
        "ShadowRequest",
        "ShadowView",
        "RebalanceView",
    ] {
        assert!(
            schemas.contains_key(name),
            "schema {name} missing: {:?}",
            schemas.keys()
        );
    }
    assert_eq!(schemas["Task"]["prefixItems"].as_array().unwrap().len(), 2);
    let load_forms = schemas["LoadItem"]["oneOf"].as_array().unwrap();
    let lengths: Vec<usize> = load_forms
        .iter()
        .map(|form| form["prefixItems"].as_array().unwrap().len())
        .collect();
    assert_eq!(
        lengths,
        [3, 4],
        "[topic, partition, load], [topic, first, last, load]"
    );
    let request = &schemas["HeartbeatRequest"]["properties"];
    for field in ["loads", "utilisation", "load_capacity"] {
        assert!(request[field].is_object(), "{field}: {request}");
    }
    // Every error response has the error body.
    let heartbeat = &paths["/v1/groups/{group}/heartbeat"]["post"]["responses"];
    for status in ["400", "404", "409", "413", "415"] {
        assert_eq!(
            heartbeat[status]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/ErrorBody",
            "{status}"
        );
    }
}

#[test]
fn the_config_schema_lists_exactly_the_config_fields() {
    use utoipa::PartialSchema;
    let schema = serde_json::to_value(GroupConfigDoc::schema()).unwrap();
    let documented: std::collections::BTreeSet<String> = schema["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    let config = GroupConfig::with_topics(vec![TopicConfig {
        name: "orders".into(),
        partitions: 1,
    }]);
    let mut actual: std::collections::BTreeSet<String> = serde_json::to_value(&config)
        .unwrap()
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    // Internal: the API sets it from a plaintext `member_token` (documented,
    // write-only) and never shows it.
    actual.remove("member_token_sha256");
    actual.remove("reader_token_sha256");
    actual.insert("member_token".into());
    actual.insert("reader_token".into());
    assert_eq!(
        documented, actual,
        "GroupConfigDoc is out of step with GroupConfig"
    );
    assert_eq!(schema["required"], json!(["topics"]));
}

#[tokio::test]
async fn the_served_document_is_the_generated_one() {
    let f = fixture();
    let (status, doc) = f.call("GET", "/v1/openapi.json", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(doc, serde_json::to_value(openapi()).unwrap());
}

/// The document says what the routes accept: a capacity up to 2^32 − 1 (not
/// `int32`), and the 415 of bind and preview.
#[test]
fn the_document_has_capacitys_range_and_the_415_of_bind_and_preview() {
    let doc = serde_json::to_value(openapi()).unwrap();
    let capacity = &doc["components"]["schemas"]["HeartbeatRequest"]["properties"]["capacity"];
    assert_eq!(capacity["format"], "int64", "{capacity}");
    assert_eq!(capacity["maximum"], json!(4294967295u64), "{capacity}");
    for (path, method) in [
        ("/v1/groups/{group}/assignor", "put"),
        ("/v1/groups/{group}/assignor/preview", "post"),
    ] {
        let responses = &doc["paths"][path][method]["responses"];
        assert!(responses["415"].is_object(), "{path}: {responses}");
    }
}
