//! The heartbeat's large bodies: a member of a big group whose tasks form
//! no ranges reports them one by one, so the heartbeat route reads bodies
//! up to [`HEARTBEAT_BODY_BYTES_MAX`] where every other route stops at
//! [`BODY_BYTES_MAX`]. The route is open to anyone who can reach the
//! host (a group's member token is checked only once the body is read), so
//! the bodies past the ordinary limit that are read at once share one
//! budget, [`LARGE_BODIES_BYTES_MAX`]: with it spent, a large heartbeat is
//! refused 503 `too_many_large_bodies` with `Retry-After` before any of its
//! body is read, and the host's memory for bodies stays bounded whatever
//! the number of connections. A body of the ordinary size never waits for
//! the budget, and one without a `Content-Length` gets the ordinary limit.

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;

use super::error::{ApiError, BODY_BYTES_MAX};

/// The heartbeat route's body limit; see
/// [`assignd_wire::HEARTBEAT_BODY_BYTES_MAX`].
pub const HEARTBEAT_BODY_BYTES_MAX: usize = assignd_wire::HEARTBEAT_BODY_BYTES_MAX as usize;

/// Bytes of heartbeat bodies past [`BODY_BYTES_MAX`] read at once, in
/// all: four of the largest.
pub const LARGE_BODIES_BYTES_MAX: usize = 4 * HEARTBEAT_BODY_BYTES_MAX;

/// The budget's unit: a permit per KiB keeps the count within `u32`.
const PERMIT_BYTES: usize = 1 << 10;

/// The budget of large bodies, shared by every heartbeat of the host.
#[derive(Clone)]
pub struct LargeBodies {
    permits: Arc<Semaphore>,
}

impl LargeBodies {
    pub fn new(bytes_max: usize) -> Self {
        LargeBodies {
            permits: Arc::new(Semaphore::new(bytes_max.div_ceil(PERMIT_BYTES))),
        }
    }
}

impl Default for LargeBodies {
    fn default() -> Self {
        LargeBodies::new(LARGE_BODIES_BYTES_MAX)
    }
}

/// Admits a heartbeat by its declared length: the ordinary limit without
/// one or at most the ordinary size, the heartbeat's limit while the
/// budget holds its length, 413 past the heartbeat's limit and 503 with
/// the budget spent, neither having read the body.
pub async fn admit(
    State(budget): State<LargeBodies>,
    mut request: Request,
    next: Next,
) -> Response {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<usize>().ok());
    let Some(len) = declared.filter(|&len| len > BODY_BYTES_MAX) else {
        return next.run(request).await;
    };
    if len > HEARTBEAT_BODY_BYTES_MAX {
        return ApiError::PayloadTooLarge.into_response();
    }
    let permits = len.div_ceil(PERMIT_BYTES) as u32;
    let Ok(_held) = budget.permits.clone().try_acquire_many_owned(permits) else {
        return ApiError::LargeBodiesBusy.into_response();
    };
    DefaultBodyLimit::max(HEARTBEAT_BODY_BYTES_MAX).apply(&mut request);
    // The permits go back once the answer is made: the body and the
    // request parsed from it are gone by then.
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::body::{Body, Bytes};
    use axum::http::{Request, StatusCode};
    use axum::routing::post;
    use tower::ServiceExt;

    use super::*;

    /// A route that reads its whole body, behind `budget`.
    fn app(budget: LargeBodies) -> Router {
        Router::new()
            .route(
                "/",
                post(|body: Bytes| async move { body.len().to_string() }),
            )
            .route_layer(axum::middleware::from_fn_with_state(budget, admit))
            .layer(DefaultBodyLimit::max(BODY_BYTES_MAX))
    }

    async fn post_body(app: Router, len: usize, declared: bool) -> (StatusCode, String) {
        let mut request = Request::post("/");
        if declared {
            request = request.header(header::CONTENT_LENGTH, len);
        }
        let response = app
            .oneshot(request.body(Body::from(vec![b'x'; len])).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn a_declared_large_body_is_read_while_the_budget_holds_it() {
        let len = 3 * BODY_BYTES_MAX;
        let answer = post_body(app(LargeBodies::new(4 * BODY_BYTES_MAX)), len, true).await;
        assert_eq!(answer, (StatusCode::OK, len.to_string()));
    }

    #[tokio::test]
    async fn a_body_without_a_length_gets_the_ordinary_limit() {
        let budget = LargeBodies::new(4 * BODY_BYTES_MAX);
        let (status, _) = post_body(app(budget.clone()), BODY_BYTES_MAX + 1, false).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
        let answer = post_body(app(budget), BODY_BYTES_MAX, false).await;
        assert_eq!(answer, (StatusCode::OK, BODY_BYTES_MAX.to_string()));
    }

    #[tokio::test]
    async fn a_large_body_past_the_spent_budget_is_refused_and_an_ordinary_one_is_not() {
        let budget = LargeBodies::new(4 * BODY_BYTES_MAX);
        // Three quarters of the budget held by bodies being read.
        let held = budget
            .permits
            .clone()
            .try_acquire_many_owned((3 * BODY_BYTES_MAX / PERMIT_BYTES) as u32)
            .unwrap();
        let (status, body) = post_body(app(budget.clone()), 2 * BODY_BYTES_MAX, true).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.contains("too_many_large_bodies"), "{body}");
        let answer = post_body(app(budget.clone()), BODY_BYTES_MAX, true).await;
        assert_eq!(answer, (StatusCode::OK, BODY_BYTES_MAX.to_string()));
        // Once those are read, the budget is whole again.
        drop(held);
        let len = 2 * BODY_BYTES_MAX;
        let answer = post_body(app(budget.clone()), len, true).await;
        assert_eq!(answer, (StatusCode::OK, len.to_string()));
        assert_eq!(
            budget.permits.available_permits(),
            4 * BODY_BYTES_MAX / PERMIT_BYTES,
            "every permit back after the answer"
        );
    }

    #[tokio::test]
    async fn a_declared_body_past_the_heartbeat_limit_is_refused_unread() {
        let budget = LargeBodies::new(4 * BODY_BYTES_MAX);
        let request = Request::post("/")
            .header(header::CONTENT_LENGTH, HEARTBEAT_BODY_BYTES_MAX + 1)
            .body(Body::empty())
            .unwrap();
        let response = app(budget).oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    }
}
