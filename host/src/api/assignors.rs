//! The assignor registry routes: upload a component, list, show and delete
//! modules. Validation and compilation run off the async threads.

use std::sync::Arc;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};

use super::error::{ApiError, ApiPath};
use super::wire::{AssignorList, AssignorView, ErrorBody};
use crate::plugins::{BUILTIN_NAMES, LoadedModule, PluginError, builtin_component};
use crate::registry::{Entry, MODULE_UPLOAD_BYTES_MAX, RegistryError, Resolved, info_json};
use crate::runtime::{Runtime, RuntimeError};

fn uploaded_view(entry: &Entry) -> AssignorView {
    AssignorView {
        id: entry.module.id.clone(),
        name: entry.name.clone(),
        version: entry.version.clone(),
        builtin: false,
        info: info_json(&entry.module),
        size_bytes: entry.size_bytes,
        uploaded_at_ms: Some(entry.uploaded_at_ms),
    }
}

fn builtin_view(name: &str, module: &LoadedModule) -> AssignorView {
    AssignorView {
        id: module.id.clone(),
        name: name.to_owned(),
        version: module.info.version.clone(),
        builtin: true,
        info: info_json(module),
        size_bytes: builtin_component(name).map_or(0, |b| b.len() as u64),
        uploaded_at_ms: None,
    }
}

/// Runs blocking registry work (compiling, file writes) off the async
/// threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|_| ApiError::Panicked)?
}

fn builtin_views(runtime: &Arc<Runtime>) -> Result<Vec<AssignorView>, PluginError> {
    let engine = runtime.registry().engine();
    BUILTIN_NAMES
        .iter()
        .map(|name| Ok(builtin_view(name, &*engine.load_builtin(name)?)))
        .collect()
}

fn builtin_failed(error: PluginError) -> ApiError {
    // A built-in that does not load is a broken build: a server error.
    tracing::error!(%error, "a built-in assignor does not load");
    ApiError::Panicked
}

/// The value of query parameter `key`, percent-decoded.
fn query_param(uri: &Uri, key: &str) -> Result<String, ApiError> {
    let query = uri.query().unwrap_or("");
    for pair in query.split('&') {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if k == key {
            return percent_decode(v).ok_or_else(|| {
                ApiError::InvalidQuery(format!(
                    "query parameter {key:?} is not valid percent-encoded UTF-8"
                ))
            });
        }
    }
    Err(ApiError::InvalidQuery(format!(
        "query parameter {key:?} is required"
    )))
}

fn percent_decode(value: &str) -> Option<String> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// Uploads an assignor component.
///
/// The body is the component's bytes (at most 48 MiB). It is checked
/// before anything is stored: it must be a component exporting
/// `assignd:assignor/assignor@0.1.0` and importing only the log interface,
/// compile, answer `info()`, and answer a valid assignment of a small
/// generated group (4 members, 48 tasks) within the default limits. The
/// same bytes again answer 200 with the existing module (its first name and
/// version) and store nothing.
#[utoipa::path(
    post,
    path = "/v1/assignors",
    tag = "assignors",
    params(
        ("name" = String, Query, description = "The module's name (1 to 128 bytes, no '@', '/', control or format characters)"),
        ("version" = String, Query, description = "The module's version (1 to 128 bytes, no '@', '/', control or format characters)"),
    ),
    request_body(content = Vec<u8>, content_type = "application/wasm", description = "The component's bytes (application/wasm or application/octet-stream)"),
    responses(
        (status = 201, description = "Stored", body = AssignorView),
        (status = 200, description = "These bytes were already stored", body = AssignorView),
        (status = 400, description = "`invalid_query`, `invalid_module_name`, `incomplete_body` (the connection ended before the body did), or what made the module fail to load: `not_wasm`, `core_module`, `unsupported_wasm_version`, `wrong_world`, `foreign_import`, `compile_failed`, `compile_timeout`, `compile_memory_limit`, `compile_crashed`, `instantiate_failed`, `trapped`, …", body = ErrorBody),
        (status = 409, description = "`module_name_taken`: another module has this name and version; `modules_max_reached`, `module_bytes_max_reached`: the uploaded modules are at `serve --modules-max` or these bytes would pass `--module-bytes-max` (in a cluster, counting the cluster's modules)", body = ErrorBody),
        (status = 408, description = "`request_timeout`: the body did not arrive within the body-read timeout", body = ErrorBody),
        (status = 413, description = "`payload_too_large`", body = ErrorBody),
        (status = 415, description = "`unsupported_media_type`", body = ErrorBody),
        (status = 422, description = "`self_test_failed`", body = ErrorBody),
        (status = 503, description = "`compile_busy`: as many components as allowed are being compiled; try again shortly", body = ErrorBody),
    )
)]
pub async fn upload_assignor(
    State(runtime): State<Arc<Runtime>>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Result<(StatusCode, Json<AssignorView>), ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let media = content_type.split(';').next().unwrap_or("").trim();
    if !media.eq_ignore_ascii_case("application/wasm")
        && !media.eq_ignore_ascii_case("application/octet-stream")
    {
        return Err(ApiError::UnsupportedMediaType(format!(
            "expected a body of type application/wasm or application/octet-stream, got {content_type:?}"
        )));
    }
    let name = query_param(&uri, "name")?;
    let version = query_param(&uri, "version")?;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > MODULE_UPLOAD_BYTES_MAX as u64) {
        return Err(ApiError::ModuleTooLarge);
    }
    let bytes: Bytes = axum::body::to_bytes(body, MODULE_UPLOAD_BYTES_MAX)
        .await
        .map_err(|e| super::error::upload_body_failed(&e, ApiError::ModuleTooLarge))?;
    let uploader = runtime.clone();
    let (entry, created) = blocking(move || {
        uploader
            .upload_module(&name, &version, &bytes)
            .map_err(ApiError::Runtime)
    })
    .await?;
    tracing::info!(id = %entry.module.id, name = %entry.name, version = %entry.version, created, "assignor uploaded");
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(uploaded_view(&entry))))
}

/// Every assignor: the four built-ins (`builtin: true`) and every uploaded
/// module.
#[utoipa::path(
    get,
    path = "/v1/assignors",
    tag = "assignors",
    responses((status = 200, description = "Every assignor", body = AssignorList))
)]
pub async fn list_assignors(
    State(runtime): State<Arc<Runtime>>,
) -> Result<Json<AssignorList>, ApiError> {
    let assignors = blocking(move || {
        let mut views = builtin_views(&runtime).map_err(builtin_failed)?;
        views.extend(runtime.registry().list().iter().map(uploaded_view));
        Ok(views)
    })
    .await?;
    Ok(Json(AssignorList { assignors }))
}

/// One assignor, by module id, `name@version`, or built-in name.
#[utoipa::path(
    get,
    path = "/v1/assignors/{assignor}",
    tag = "assignors",
    params(("assignor" = String, Path, description = "A module id (sha256), `name@version`, or a built-in name")),
    responses(
        (status = 200, description = "The assignor", body = AssignorView),
        (status = 400, description = "`invalid_path`: a path parameter that is not UTF-8", body = ErrorBody),
        (status = 404, description = "`unknown_module`", body = ErrorBody),
    )
)]
pub async fn get_assignor(
    State(runtime): State<Arc<Runtime>>,
    ApiPath(reference): ApiPath<String>,
) -> Result<Json<AssignorView>, ApiError> {
    let view = blocking(move || {
        let registry = runtime.registry();
        match registry.resolve(&reference) {
            Some(Resolved::Builtin(name)) => {
                let module = registry
                    .engine()
                    .load_builtin(name)
                    .map_err(builtin_failed)?;
                Ok(builtin_view(name, &module))
            }
            Some(Resolved::Uploaded(id)) => registry
                .get(&id)
                .map(|entry| uploaded_view(&entry))
                .ok_or_else(|| unknown(reference)),
            None => Err(unknown(reference)),
        }
    })
    .await?;
    Ok(Json(view))
}

fn unknown(reference: String) -> ApiError {
    ApiError::Runtime(RuntimeError::Registry(RegistryError::Unknown(reference)))
}

/// Deletes an uploaded module (by id or `name@version`). Refused while any
/// group's config names it, and for built-ins.
#[utoipa::path(
    delete,
    path = "/v1/assignors/{assignor}",
    tag = "assignors",
    params(("assignor" = String, Path, description = "A module id (sha256) or `name@version`")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, description = "`invalid_path`: a path parameter that is not UTF-8", body = ErrorBody),
        (status = 404, description = "`unknown_module`", body = ErrorBody),
        (status = 409, description = "`module_in_use` (a group is bound to it: in cluster mode, a group of any node), `builtin_assignor`", body = ErrorBody),
        (status = 503, description = "`storage_failed`", body = ErrorBody),
    )
)]
pub async fn delete_assignor(
    State(runtime): State<Arc<Runtime>>,
    ApiPath(reference): ApiPath<String>,
) -> Result<StatusCode, ApiError> {
    let entry = runtime.delete_assignor(&reference).await?;
    tracing::info!(id = %entry.module.id, name = %entry.name, version = %entry.version, "assignor deleted");
    Ok(StatusCode::NO_CONTENT)
}
