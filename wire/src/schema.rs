//! The bodies' OpenAPI schemas that serde's shapes do not give utoipa:
//! tasks, lag rows and task-list items are fixed-length JSON arrays.

use std::borrow::Cow;

use utoipa::openapi::schema::{
    ArrayBuilder, ArrayItems, ObjectBuilder, OneOfBuilder, Schema, Type,
};
use utoipa::openapi::{KnownFormat, RefOr, SchemaFormat};
use utoipa::{PartialSchema, ToSchema};

use crate::{LagRow, Task};

impl PartialSchema for Task {
    fn schema() -> RefOr<Schema> {
        tuple_schema(
            "A task: `[topic, partition]`.",
            vec![
                string_schema(),
                integer_schema(KnownFormat::Int32, "partition"),
            ],
            serde_json::json!(["orders", 0]),
        )
    }
}

impl ToSchema for Task {
    fn name() -> Cow<'static, str> {
        "Task".into()
    }
}

impl PartialSchema for LagRow {
    fn schema() -> RefOr<Schema> {
        tuple_schema(
            "A lag report: `[topic, partition, lag]`.",
            vec![
                string_schema(),
                integer_schema(KnownFormat::Int32, "partition"),
                integer_schema(KnownFormat::Int64, "lag in records"),
            ],
            serde_json::json!(["orders", 3, 1500]),
        )
    }
}

impl ToSchema for LagRow {
    fn name() -> Cow<'static, str> {
        "LagRow".into()
    }
}

/// An item of a heartbeat's `owned` (and, with `task_ranges`, of its
/// answer's task lists): `[topic, partition]` or `[topic, first, last]`.
/// Only its schema: [`crate::ranges`] reads and writes it.
pub struct TaskItem;

impl PartialSchema for TaskItem {
    fn schema() -> RefOr<Schema> {
        OneOfBuilder::new()
            .item(Task::schema())
            .item(tuple_schema(
                "Tasks `[topic, first, last]`: partitions first to last, both included.",
                vec![
                    string_schema(),
                    integer_schema(KnownFormat::Int32, "first partition"),
                    integer_schema(KnownFormat::Int32, "last partition"),
                ],
                serde_json::json!(["orders", 0, 99999]),
            ))
            .description(Some("A task, or a range of one topic's partitions"))
            .into()
    }
}

impl ToSchema for TaskItem {
    fn name() -> Cow<'static, str> {
        "TaskItem".into()
    }
}

pub(crate) fn string_schema() -> Schema {
    ObjectBuilder::new().schema_type(Type::String).into()
}

pub(crate) fn integer_schema(format: KnownFormat, description: &str) -> Schema {
    ObjectBuilder::new()
        .schema_type(Type::Integer)
        .format(Some(SchemaFormat::KnownFormat(format)))
        .minimum(Some(0))
        .description(Some(description))
        .into()
}

pub(crate) fn tuple_schema(
    description: &str,
    items: Vec<Schema>,
    example: serde_json::Value,
) -> RefOr<Schema> {
    let len = items.len();
    ArrayBuilder::new()
        .prefix_items(items)
        .items(ArrayItems::False)
        .min_items(Some(len))
        .max_items(Some(len))
        .description(Some(description))
        .examples([example])
        .into()
}
