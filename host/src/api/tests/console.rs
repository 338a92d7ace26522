//! The console's files: `/ui` answers the page with its security headers,
//! every file a page names (the page's `src`/`href`, a module's imports)
//! is served with its content type, and the embedded list is exactly the
//! folder `host/console/`.

use std::collections::BTreeSet;

use super::*;
use crate::api::console::{ASSETS, CONSOLE_PATH, CONTENT_SECURITY_POLICY_VALUE};

async fn get(f: &Fixture, path: &str) -> (StatusCode, axum::http::HeaderMap, String) {
    let request = Request::builder().uri(path).body(Body::empty()).unwrap();
    let response = f.app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, headers, String::from_utf8(bytes.to_vec()).unwrap())
}

/// The values of `attribute="..."` in `html`.
fn attribute_values(html: &str, attribute: &str) -> Vec<String> {
    let marker = format!(" {attribute}=\"");
    html.match_indices(&marker)
        .map(|(at, _)| {
            let rest = &html[at + marker.len()..];
            rest[..rest.find('"').unwrap()].to_owned()
        })
        .collect()
}

/// The modules `js` imports (`from "./x.js"`), as names under `/ui/`.
fn imports(js: &str) -> Vec<String> {
    js.match_indices("from \"./")
        .map(|(at, _)| {
            let rest = &js[at + "from \"./".len()..];
            rest[..rest.find('"').unwrap()].to_owned()
        })
        .collect()
}

#[tokio::test]
async fn the_page_is_served_with_a_strict_content_security_policy() {
    let f = fixture();
    let (status, headers, html) = get(&f, CONSOLE_PATH).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CONTENT_TYPE], "text/html; charset=utf-8");
    let policy = headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
    assert_eq!(policy, CONTENT_SECURITY_POLICY_VALUE);
    assert!(policy.starts_with("default-src 'self';"), "{policy}");
    assert!(!policy.contains("unsafe"), "{policy}");
    assert_eq!(headers[header::CACHE_CONTROL], "no-cache");
    assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    assert!(html.contains("<main"), "{html}");
    // No inline script or style for the policy to refuse.
    assert!(
        !html.contains("<script>") && !html.contains(" style="),
        "{html}"
    );
    assert!(!html.contains(" onclick="), "{html}");
    // The browser's copy, when it is this one, is not sent again.
    let request = Request::builder()
        .uri(CONSOLE_PATH)
        .header(header::IF_NONE_MATCH, headers[header::ETAG].clone())
        .body(Body::empty())
        .unwrap();
    let response = f.app.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::NOT_MODIFIED);
    // The files need no token, and an unknown one is the API's 404.
    let (status, _, body) = get(&f, "/ui/nothing.js").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body.contains("\"not_found\""), "{body}");
}

#[tokio::test]
async fn every_file_a_page_names_is_served() {
    let f = fixture();
    let (_, _, html) = get(&f, CONSOLE_PATH).await;
    let mut named: Vec<String> = ["src", "href"]
        .iter()
        .flat_map(|attribute| attribute_values(&html, attribute))
        .filter_map(|url| url.strip_prefix("/ui/").map(str::to_owned))
        .collect();
    assert!(named.contains(&"app.js".to_owned()), "{named:?}");
    assert!(named.contains(&"style.css".to_owned()), "{named:?}");
    let mut seen = BTreeSet::new();
    while let Some(name) = named.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let (status, headers, body) = get(&f, &format!("/ui/{name}")).await;
        assert_eq!(status, StatusCode::OK, "{name} is named but not served");
        let content_type = headers[header::CONTENT_TYPE].to_str().unwrap();
        let expected = if name.ends_with(".js") {
            "text/javascript; charset=utf-8"
        } else if name.ends_with(".css") {
            "text/css; charset=utf-8"
        } else {
            "text/html; charset=utf-8"
        };
        assert_eq!(content_type, expected, "{name}");
        assert!(
            headers.contains_key(header::CONTENT_SECURITY_POLICY),
            "{name}"
        );
        if name.ends_with(".js") {
            named.extend(imports(&body));
        }
    }
    // Every module is reached from the page: none is left unused.
    let served: BTreeSet<String> = ASSETS
        .iter()
        .map(|asset| asset.name.to_owned())
        .filter(|name| name != "index.html")
        .collect();
    assert_eq!(seen, served);
}

#[test]
fn the_embedded_files_are_the_console_folder() {
    let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("console");
    let on_disk: BTreeSet<String> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    let embedded: BTreeSet<String> = ASSETS.iter().map(|a| a.name.to_owned()).collect();
    assert_eq!(on_disk, embedded, "host/console/ against console::ASSETS");
    assert_eq!(ASSETS[0].name, "index.html", "the page `/ui` answers");
}
