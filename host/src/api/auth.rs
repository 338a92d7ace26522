//! Bearer tokens: the admin token every admin route requires, the
//! optional read-only token its GET routes accept too, the checks that
//! tell a missing credential (401) from a wrong one (403), and the
//! security schemes of the OpenAPI document. It owns no I/O: where the
//! admin token comes from (a flag, the environment, a file in the data
//! dir) is `assignd serve`'s business; a group's member token lives in its
//! config as a sha256 and is checked by the runtime under the core's lock.
//!
//! Tokens are compared as sha256 digests, byte by byte without an early
//! exit, so the time a comparison takes says nothing about the token.

use std::sync::Arc;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::Response;
use sha2::{Digest, Sha256};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{ContentBuilder, OpenApi, Ref, ResponseBuilder};

use super::error::ApiError;
use crate::protocol::core::ProtocolError;
use crate::protocol::group::GroupConfig;
use crate::runtime::{TokenChange, TokenChanges};

/// The shortest token accepted (admin or member).
pub const TOKEN_BYTES_MIN: usize = 16;
/// The longest token accepted.
pub const TOKEN_BYTES_MAX: usize = 1024;

/// The OpenAPI name of the admin token's security scheme.
pub const ADMIN_SCHEME: &str = "admin_token";
/// The OpenAPI name of the member token's security scheme.
pub const MEMBER_SCHEME: &str = "member_token";
/// The OpenAPI name of the reader token's security scheme.
pub const READER_SCHEME: &str = "reader_token";
/// The OpenAPI name of the read-only token's security scheme.
pub const READ_ONLY_SCHEME: &str = "read_only_token";

/// Checks a token's shape: 16 to 1024 visible ASCII characters (no
/// spaces), so it travels unchanged in an `Authorization` header and in a
/// shell variable.
pub fn check_token(token: &str) -> Result<(), String> {
    if token.len() < TOKEN_BYTES_MIN {
        return Err(format!(
            "a token must be at least {TOKEN_BYTES_MIN} bytes long, got {}",
            token.len()
        ));
    }
    if token.len() > TOKEN_BYTES_MAX {
        return Err(format!(
            "a token must be at most {TOKEN_BYTES_MAX} bytes long, got {}",
            token.len()
        ));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(
            "a token must be visible ASCII characters only (no spaces or control characters)"
                .into(),
        );
    }
    Ok(())
}

/// The sha256 of `token`.
pub fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// The sha256 of `token`, lowercase hex: how a group's member token is
/// kept in its config.
pub fn digest_hex(token: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut hex = String::with_capacity(64);
    for byte in digest(token) {
        hex.push(char::from(HEX[usize::from(byte >> 4)]));
        hex.push(char::from(HEX[usize::from(byte & 0xf)]));
    }
    hex
}

/// The sha256 (lowercase hex) of a heartbeat's bearer token, if it sent
/// one; the runtime compares it with the group's member token. Extracting
/// it reads the one header (no copy of the others).
pub struct MemberCredential(pub Option<String>);

impl<S: Send + Sync> FromRequestParts<S> for MemberCredential {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(MemberCredential(match credential(&parts.headers) {
            Credential::Missing => None,
            Credential::Bearer(token) => Some(digest_hex(token)),
        }))
    }
}

/// Splits the body of `PUT /v1/groups/{group}` into the core's config and
/// what it does to the group's tokens: `member_token` (the heartbeat's)
/// and `reader_token` (the routes'), each absent keeps the group's,
/// `null` removes it, a string (checked by [`check_token`], else 400
/// `invalid_request`) becomes it, kept as its sha256. The rest is parsed
/// as the core's `GroupConfig`, with the same messages as any JSON body;
/// the digests themselves are internal and refused.
pub fn split_config(
    mut body: serde_json::Map<String, serde_json::Value>,
) -> Result<(GroupConfig, TokenChanges), ApiError> {
    let mut token_change = |name: &str| {
        if body.contains_key(&format!("{name}_sha256")) {
            return Err(ApiError::InvalidJson(format!(
                "unknown field `{name}_sha256`: send the plaintext as `{name}`; the host \
                 keeps only its sha256"
            )));
        }
        Ok(match body.remove(name) {
            None => TokenChange::Keep,
            Some(serde_json::Value::Null) => TokenChange::Set(None),
            Some(serde_json::Value::String(token)) => {
                check_token(&token).map_err(|e| ProtocolError::Invalid(format!("{name}: {e}")))?;
                TokenChange::Set(Some(digest_hex(&token)))
            }
            Some(other) => {
                return Err(ApiError::InvalidJson(format!(
                    "{name}: expected a string or null, got {other}"
                )));
            }
        })
    };
    let tokens = TokenChanges {
        member: token_change("member_token")?,
        reader: token_change("reader_token")?,
    };
    let rest = serde_json::to_vec(&body).expect("a JSON map always serializes");
    let axum::Json(config) = axum::Json::<GroupConfig>::from_bytes(&rest)?;
    Ok((config, tokens))
}

/// Whether two digests are equal, looking at every byte whatever the
/// first difference.
pub fn digests_equal(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// What the `Authorization` header carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Credential<'a> {
    /// No header, another scheme, an empty token or bytes that are not
    /// text: no credential at all.
    Missing,
    /// `Bearer TOKEN`.
    Bearer(&'a str),
}

/// Reads `Authorization: Bearer TOKEN` (the scheme in any case).
pub fn credential(headers: &HeaderMap) -> Credential<'_> {
    let Some(value) = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok()) else {
        return Credential::Missing;
    };
    let Some((scheme, token)) = value.trim().split_once(' ') else {
        return Credential::Missing;
    };
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        return Credential::Missing;
    }
    Credential::Bearer(token)
}

/// The admin token, kept as its digest, and the read-only token if the
/// host has one: it reads what the admin token reads (the admin routes'
/// `GET`s) and changes nothing.
#[derive(Clone)]
pub struct AdminToken {
    digest: [u8; 32],
    read_only: Option<[u8; 32]>,
    /// Whether `GET /metrics` needs it too (`serve --metrics-auth`).
    guards_metrics: bool,
}

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminToken(..)")
    }
}

impl AdminToken {
    /// The admin token `token`, if its shape is acceptable
    /// ([`check_token`]).
    pub fn new(token: &str) -> Result<AdminToken, String> {
        check_token(token)?;
        Ok(AdminToken {
            digest: digest(token),
            read_only: None,
            guards_metrics: false,
        })
    }

    /// The same admin token with `token` as the read-only token, if its
    /// shape is acceptable ([`check_token`]) and it is not the admin token.
    pub fn with_read_only(self, token: &str) -> Result<AdminToken, String> {
        check_token(token)?;
        let read_only = digest(token);
        if digests_equal(&read_only, &self.digest) {
            return Err("the read-only token must differ from the admin token".into());
        }
        Ok(AdminToken {
            read_only: Some(read_only),
            ..self
        })
    }

    /// The same token, required by `GET /metrics` too if `guards`.
    pub fn guarding_metrics(self, guards: bool) -> AdminToken {
        AdminToken {
            guards_metrics: guards,
            ..self
        }
    }

    /// Whether `GET /metrics` needs the token.
    pub fn guards_metrics(&self) -> bool {
        self.guards_metrics
    }

    /// Checks a request's credential: 401 without one, 403 with another
    /// token.
    pub fn check(&self, credential: Credential<'_>) -> Result<(), ApiError> {
        match credential {
            Credential::Missing => Err(ApiError::Unauthorized(
                "this route needs the admin token: send `Authorization: Bearer TOKEN`",
            )),
            Credential::Bearer(token) if digests_equal(&digest(token), &self.digest) => Ok(()),
            Credential::Bearer(_) => Err(ApiError::Forbidden("the token is not the admin token")),
        }
    }

    /// Checks the credential of a request to an admin route: the admin
    /// token passes; the read-only token passes a `GET` (or `HEAD`) and is
    /// refused anything else (403 `read_only_token`); otherwise as
    /// [`AdminToken::check`].
    pub fn check_request(
        &self,
        method: &axum::http::Method,
        credential: Credential<'_>,
    ) -> Result<Access, ApiError> {
        let refused = match self.check(credential) {
            Ok(()) => return Ok(Access::Admin),
            Err(refused) => refused,
        };
        let (Credential::Bearer(token), Some(read_only)) = (credential, &self.read_only) else {
            return Err(refused);
        };
        if !digests_equal(&digest(token), read_only) {
            return Err(refused);
        }
        if method == axum::http::Method::GET || method == axum::http::Method::HEAD {
            Ok(Access::ReadOnly)
        } else {
            Err(ApiError::ReadOnlyToken)
        }
    }
}

/// The middleware in front of every admin route: the request goes on only
/// with the admin token (or the read-only token, for a `GET`). It runs before the handler reads the path or the
/// body, so a refused request changes nothing and costs nothing.
pub async fn require_admin(
    State(admin): State<Arc<AdminToken>>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let mut request = request;
    let access = admin.check_request(request.method(), credential(request.headers()))?;
    request.extensions_mut().insert(access);
    Ok(next.run(request).await)
}

/// What a request's token may do on the admin routes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    /// The admin token: everything.
    Admin,
    /// The read-only token: the admin routes' `GET`s.
    ReadOnly,
}

/// The body of `GET /v1/token`.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct TokenAccess {
    pub access: Access,
}

/// What the request's token may do: `admin` or `read_only` (the console
/// asks it at login to show only the actions the token may take).
#[utoipa::path(
    get,
    path = "/v1/token",
    tag = "service",
    responses((status = 200, description = "The token's access", body = TokenAccess))
)]
pub async fn token_access(access: Option<axum::Extension<Access>>) -> axum::Json<TokenAccess> {
    let access = access.map_or(Access::Admin, |axum::Extension(access)| access);
    axum::Json(TokenAccess { access })
}

/// Marks every operation of `doc` (the admin routes) as requiring the
/// admin token (a `GET`: or the read-only token), with its 401 and 403
/// answers.
pub fn document_admin_routes(doc: &mut OpenApi) {
    for item in doc.paths.paths.values_mut() {
        let reads = item.get.iter_mut().map(|operation| (operation, true));
        let writes = [
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ]
        .into_iter()
        .flatten()
        .map(|operation| (operation, false));
        for (operation, read) in reads.chain(writes) {
            let mut security = vec![SecurityRequirement::new(ADMIN_SCHEME, Vec::<String>::new())];
            let forbidden = if read {
                security.push(SecurityRequirement::new(
                    READ_ONLY_SCHEME,
                    Vec::<String>::new(),
                ));
                "`forbidden`: the token is neither the admin token nor the read-only token"
            } else {
                "`forbidden`: the token is not the admin token; `read_only_token`: the \
                 read-only token, which changes nothing"
            };
            operation.security = Some(security);
            let responses = &mut operation.responses.responses;
            responses.insert(
                "401".into(),
                error_response("`unauthorized`: no admin token (`Authorization: Bearer TOKEN`)")
                    .into(),
            );
            responses.insert("403".into(), error_response(forbidden).into());
        }
    }
}

/// A response whose body is the error body.
pub fn error_response(description: &str) -> utoipa::openapi::Response {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorBody")))
                .build(),
        )
        .build()
}

/// Adds the bearer schemes to the document's components.
pub fn document_schemes(doc: &mut OpenApi) {
    let components = doc.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        ADMIN_SCHEME,
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .description(Some(
                    "The host's admin token: `assignd serve --admin-token`, \
                     `ASSIGND_ADMIN_TOKEN`, or the one generated into DATA_DIR/admin-token \
                     at first start. Every route but the member heartbeat, \
                     `/v1/groups/{group}/coordinator`, `/healthz`, `/metrics` (unless the host \
                     runs with `--metrics-auth`) and `/v1/openapi.json` requires it.",
                ))
                .build(),
        ),
    );
    components.add_security_scheme(
        READ_ONLY_SCHEME,
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .description(Some(
                    "The host's read-only token, if it has one (`assignd serve \
                     --read-only-token-file`, `ASSIGND_READ_ONLY_TOKEN`): every `GET` of an \
                     admin route accepts it; every other method of an admin route refuses it \
                     with 403 `read_only_token`.",
                ))
                .build(),
        ),
    );
    components.add_security_scheme(
        MEMBER_SCHEME,
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .description(Some(
                    "A group's member token (`member_token` in its config), required by its \
                     heartbeat route when the group has one.",
                ))
                .build(),
        ),
    );
    components.add_security_scheme(
        READER_SCHEME,
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .description(Some(
                    "A group's reader token (`reader_token` in its config): reads the group's \
                     routes, and nothing else. The admin token reads them too.",
                ))
                .build(),
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(value: &[u8]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, HeaderValue::from_bytes(value).unwrap());
        headers
    }

    #[test]
    fn the_bearer_scheme_is_read_in_any_case() {
        assert_eq!(credential(&HeaderMap::new()), Credential::Missing);
        assert_eq!(
            credential(&headers(b"Bearer abc")),
            Credential::Bearer("abc")
        );
        assert_eq!(
            credential(&headers(b"bearer  abc ")),
            Credential::Bearer("abc")
        );
        assert_eq!(credential(&headers(b"Basic abc")), Credential::Missing);
        assert_eq!(credential(&headers(b"Bearer ")), Credential::Missing);
        assert_eq!(credential(&headers(b"Bearer")), Credential::Missing);
        assert_eq!(credential(&headers(b"abc")), Credential::Missing);
        assert_eq!(credential(&headers(b"Bearer \xff")), Credential::Missing);
    }

    #[test]
    fn tokens_are_checked_for_shape() {
        assert!(check_token("0123456789abcdef").is_ok());
        assert!(check_token("0123456789abcde").is_err());
        assert!(check_token("").is_err());
        assert!(check_token("0123456789 abcdef").is_err());
        assert!(check_token("0123456789abcdef\n").is_err());
        assert!(check_token(&"x".repeat(TOKEN_BYTES_MAX + 1)).is_err());
    }

    #[test]
    fn missing_is_401_and_wrong_is_403() {
        let admin = AdminToken::new("0123456789abcdef").unwrap();
        assert!(admin.check(Credential::Bearer("0123456789abcdef")).is_ok());
        let code = |result: Result<(), ApiError>| {
            let (status, code) = result.unwrap_err().status_and_code();
            (status, code.as_str())
        };
        assert_eq!(
            code(admin.check(Credential::Missing)),
            (axum::http::StatusCode::UNAUTHORIZED, "unauthorized")
        );
        assert_eq!(
            code(admin.check(Credential::Bearer("0123456789abcdeF"))),
            (axum::http::StatusCode::FORBIDDEN, "forbidden")
        );
        assert_eq!(format!("{admin:?}"), "AdminToken(..)", "never printed");
    }

    #[test]
    fn digests_are_lowercase_hex_sha256() {
        assert_eq!(
            digest_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(digests_equal(&digest("a"), &digest("a")));
        assert!(!digests_equal(&digest("a"), &digest("b")));
    }
}
