//! Version 0.2 of the assignor interface (the guest SDK's,
//! `guest-sdk/wit/assignor.wit`): 0.1 plus the group's loads.

use assignd_guest_sdk::{AssignError, Assignment, Capabilities, GroupInput, TaskMembers};

use super::super::sandbox::GuestState;

// Borrowing: the input a call lowers into the guest is a view of the
// host's `GroupInput` (`&str`, `&[u32]`), not a copy of its 10,000 member
// ids made only to be lowered and dropped.
wasmtime::component::bindgen!({
    path: "../guest-sdk/wit",
    world: "plugin",
    ownership: Borrowing { duplicate_if_necessary: true },
});

shared_glue!();

fn capabilities(c: &wit::Capabilities) -> Capabilities {
    Capabilities {
        learners: c.learners,
        standbys: c.standbys,
        racks: c.racks,
        load: c.load,
    }
}

/// Calls `assign` on the whole input, loads included.
pub(super) fn call_assign(
    plugin: &Plugin,
    store: &mut wasmtime::Store<GuestState>,
    input: &GroupInput,
) -> wasmtime::Result<Result<Assignment, AssignError>> {
    let records = WitRecords::new(input);
    let raw = plugin
        .assignd_assignor_assignor()
        .call_assign(store, records.input(input))?;
    Ok(answer(raw))
}

/// The records of an input the guest's `group-input` refers to, borrowed
/// from the host's `GroupInput`: a member costs a few words here, and its
/// strings are copied once, by wasmtime, straight into the guest's memory.
struct WitRecords<'a> {
    topics: Vec<wit::Topic<'a>>,
    subscriptions: Vec<&'a [u32]>,
    members: Vec<wit::Member<'a>>,
    params: Vec<wit::Param<'a>>,
}

impl<'a> WitRecords<'a> {
    fn new(input: &'a GroupInput) -> Self {
        WitRecords {
            topics: input
                .topics
                .iter()
                .map(|t| wit::Topic {
                    name: &t.name,
                    partitions: t.partitions,
                })
                .collect(),
            subscriptions: input.subscriptions.iter().map(Vec::as_slice).collect(),
            members: input
                .members
                .iter()
                .map(|m| wit::Member {
                    id: &m.id,
                    name: m.name.as_deref(),
                    rack: m.rack.as_deref(),
                    capacity: m.capacity,
                    subscription: m.subscription,
                    load_capacity: m.load_capacity,
                    utilisation: m.utilisation,
                })
                .collect(),
            params: input
                .params
                .iter()
                .map(|(key, value)| wit::Param { key, value })
                .collect(),
        }
    }

    /// The guest's input: these records and `input`'s columns.
    fn input<'b>(&'b self, input: &'b GroupInput) -> wit::GroupInput<'b> {
        let rows = |rows: &'b TaskMembers| wit::TaskMembersParam {
            task: &rows.task,
            member: &rows.member,
        };
        wit::GroupInput {
            topics: &self.topics,
            subscriptions: &self.subscriptions,
            members: &self.members,
            active_owner: &input.active_owner,
            learners: rows(&input.learners),
            standbys: rows(&input.standbys),
            lags: wit::TaskLags {
                task: &input.lags.task,
                member: &input.lags.member,
                lag: &input.lags.lag,
            },
            params: &self.params,
            load_unit: input.load_unit.as_deref(),
            loads: wit::TaskLoads {
                task: &input.loads.task,
                load: &input.loads.load,
            },
        }
    }
}
