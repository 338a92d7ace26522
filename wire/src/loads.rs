//! Load reports as the member protocol writes them: a heartbeat's `loads`
//! items (`[topic, partition, load]`, or `[topic, first, last, load]` for
//! a range of partitions of equal load), the bounds of a load, a
//! utilisation and a load capacity, and the answer's `load_report`, which
//! tells a member what to send. What a load means to the group is the
//! host's; this module owns the encoding and the bounds both sides check.

use serde::de::{Error as _, SeqAccess, Visitor};
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The largest load of one task (and the largest load capacity), in the
/// group's unit: far above any real rate, small enough that a sum over a
/// million tasks stays exact to a unit.
pub const LOAD_MAX: f64 = 1e15;
/// The largest utilisation a member may report (1.0 is its capacity fully
/// used; an overloaded member may report more).
pub const UTILISATION_MAX: f64 = 10.0;

/// One item of a heartbeat's `loads`: every partition `first` to `last`
/// (both included) of `topic` has load `load`. In JSON `[topic, partition,
/// load]` when `first == last`, else `[topic, first, last, load]`.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadItem {
    pub topic: String,
    pub first: u32,
    pub last: u32,
    pub load: f64,
}

impl LoadItem {
    /// One task's load.
    pub fn task(topic: impl Into<String>, partition: u32, load: f64) -> Self {
        LoadItem {
            topic: topic.into(),
            first: partition,
            last: partition,
            load,
        }
    }

    /// Partitions `first` to `last` of `topic`, all of load `load`.
    pub fn range(topic: impl Into<String>, first: u32, last: u32, load: f64) -> Self {
        LoadItem {
            topic: topic.into(),
            first,
            last,
            load,
        }
    }

    /// How many tasks the item names (0 for a range that ends before it
    /// starts, which the host refuses).
    pub fn len(&self) -> u64 {
        (u64::from(self.last) + 1).saturating_sub(u64::from(self.first))
    }

    /// Whether the item names no task (a backward range).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Serialize for LoadItem {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let single = self.first == self.last;
        let mut seq = serializer.serialize_seq(Some(if single { 3 } else { 4 }))?;
        seq.serialize_element(&self.topic)?;
        seq.serialize_element(&self.first)?;
        if !single {
            seq.serialize_element(&self.last)?;
        }
        seq.serialize_element(&self.load)?;
        seq.end()
    }
}

impl<'de> Deserialize<'de> for LoadItem {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_seq(ItemVisitor)
    }
}

struct ItemVisitor;

impl<'de> Visitor<'de> for ItemVisitor {
    type Value = LoadItem;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("[topic, partition, load] or [topic, first, last, load]")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<LoadItem, A::Error> {
        let topic: String = seq
            .next_element()?
            .ok_or_else(|| A::Error::invalid_length(0, &self))?;
        let first: u32 = seq
            .next_element()?
            .ok_or_else(|| A::Error::invalid_length(1, &self))?;
        // The third number is the load of a task, or the end of a range
        // when a fourth follows.
        let third: f64 = seq
            .next_element()?
            .ok_or_else(|| A::Error::invalid_length(2, &self))?;
        let Some(load) = seq.next_element::<f64>()? else {
            return Ok(LoadItem::task(topic, first, third));
        };
        if seq.next_element::<serde::de::IgnoredAny>()?.is_some() {
            return Err(A::Error::invalid_length(5, &self));
        }
        if third.fract() != 0.0 || !(0.0..=f64::from(u32::MAX)).contains(&third) {
            return Err(A::Error::custom(format!(
                "the last partition of [{topic:?}, {first}, {third}, {load}] is not a partition"
            )));
        }
        Ok(LoadItem::range(topic, first, third as u32, load))
    }
}

/// What a heartbeat's answer asks the member to report of its loads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum LoadReport {
    /// The host lacks this member's loads (it just joined, or the host
    /// started or took the group over): send every active task's known
    /// load, and the utilisation and load capacity if known.
    Full,
    /// Send the loads that moved past the member's threshold, and those of
    /// tasks not sent before.
    Changes,
    /// The group takes no loads: send no load fields. Also what an
    /// answer without the field (an older host) and a value this client
    /// does not know mean.
    #[default]
    #[serde(other)]
    None,
}

impl LoadReport {
    pub fn is_none(&self) -> bool {
        *self == LoadReport::None
    }
}

#[cfg(feature = "openapi")]
mod schema {
    use std::borrow::Cow;

    use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, Type};
    use utoipa::openapi::{KnownFormat, RefOr};
    use utoipa::{PartialSchema, ToSchema};

    use super::{LOAD_MAX, LoadItem};
    use crate::schema::{integer_schema, string_schema, tuple_schema};

    fn load_schema() -> Schema {
        ObjectBuilder::new()
            .schema_type(Type::Number)
            .minimum(Some(0.0))
            .maximum(Some(LOAD_MAX))
            .description(Some("load, in the group's load_unit"))
            .into()
    }

    impl PartialSchema for LoadItem {
        fn schema() -> RefOr<Schema> {
            let partition = || integer_schema(KnownFormat::Int32, "partition");
            OneOfBuilder::new()
                .item(tuple_schema(
                    "A task's load: `[topic, partition, load]`.",
                    vec![string_schema(), partition(), load_schema()],
                    serde_json::json!(["orders", 3, 120.5]),
                ))
                .item(tuple_schema(
                    "The load of each partition first to last, both included: \
                     `[topic, first, last, load]`.",
                    vec![
                        string_schema(),
                        integer_schema(KnownFormat::Int32, "first partition"),
                        integer_schema(KnownFormat::Int32, "last partition"),
                        load_schema(),
                    ],
                    serde_json::json!(["orders", 0, 99, 0]),
                ))
                .description(Some(
                    "A task's load, or a range of partitions of equal load",
                ))
                .into()
        }
    }

    impl ToSchema for LoadItem {
        fn name() -> Cow<'static, str> {
            "LoadItem".into()
        }
    }
}
