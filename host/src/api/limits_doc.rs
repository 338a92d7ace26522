//! The schema of a binding's call limits (`CallLimits`, which the core
//! deserializes itself) for the OpenAPI document: shared by the live
//! binding's wire types (`wire.rs`) and the shadow's (`shadow_views.rs`).

use utoipa::ToSchema;

/// Limits one binding puts on its assignor calls, under the host's
/// ceilings; an absent limit is the ceiling.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct CallLimitsDoc {
    /// Fuel one call may burn (about one unit per wasm instruction).
    #[schema(minimum = 1)]
    fuel_max: Option<u64>,
    /// Wall-clock time one call may take.
    #[schema(minimum = 1)]
    time_limit_ms: Option<u64>,
    /// Memory the guest may grow to.
    #[schema(minimum = 1, maximum = 4096)]
    memory_max_mib: Option<u64>,
}
