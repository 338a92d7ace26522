//! [`Scope`]: what one step of a shard is about, one group or the whole
//! shard, for what the step waits for and how heavy it may be.

/// What a step on a shard reads or changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope<'a> {
    /// One group's step (a heartbeat, an admin change, a read of it).
    Group(&'a str),
    /// A step of the whole shard (a tick, a listing of every group, a
    /// check across its groups).
    Shard,
}

impl<'a> Scope<'a> {
    /// The group, for a group's step.
    pub fn group(self) -> Option<&'a str> {
        match self {
            Scope::Group(group) => Some(group),
            Scope::Shard => None,
        }
    }
}
