//! Guest-side glue between the wit-bindgen records and [`crate::model`].
//! Only built for wasm32; the conversions move the column vectors, they do
//! not copy them. It relies on the host's running every call in a fresh
//! instance (`host/src/plugins/sandbox.rs`): the input is never freed.

use crate::Assignor;
use crate::bindings::assignd::assignor::types as wit;
use crate::model::{
    AssignError, Assignment, GroupInput, Info, Member, TaskLags, TaskLoads, TaskMembers, Topic,
};

fn install_panic_hook() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        std::panic::set_hook(Box::new(|panic| {
            // A panic becomes an `unreachable` trap and its message would be
            // lost; send it to the host first so the error can name it.
            crate::log::log(
                crate::log::Level::Error,
                &format!("{}{panic}", crate::log::PANIC_PREFIX),
            );
        }));
    });
}

#[doc(hidden)]
pub fn info<A: Assignor>() -> wit::AssignorInfo {
    install_panic_hook();
    let info: Info = A::info();
    wit::AssignorInfo {
        name: info.name,
        version: info.version,
        description: info.description,
        capabilities: wit::Capabilities {
            learners: info.capabilities.learners,
            standbys: info.capabilities.standbys,
            racks: info.capabilities.racks,
            load: info.capabilities.load,
        },
        params: info
            .params
            .into_iter()
            .map(|p| wit::ParamSpec {
                name: p.name,
                default_value: p.default_value,
                description: p.description,
            })
            .collect(),
    }
}

#[doc(hidden)]
pub fn assign<A: Assignor>(input: wit::GroupInput) -> Result<wit::Assignment, wit::AssignError> {
    install_panic_hook();
    let input = GroupInput {
        topics: input
            .topics
            .into_iter()
            .map(|t| Topic {
                name: t.name,
                partitions: t.partitions,
            })
            .collect(),
        members: input
            .members
            .into_iter()
            .map(|m| Member {
                id: m.id,
                name: m.name,
                rack: m.rack,
                capacity: m.capacity,
                subscription: m.subscription,
                load_capacity: m.load_capacity,
                utilisation: m.utilisation,
            })
            .collect(),
        subscriptions: input.subscriptions,
        active_owner: input.active_owner,
        learners: TaskMembers {
            task: input.learners.task,
            member: input.learners.member,
        },
        standbys: TaskMembers {
            task: input.standbys.task,
            member: input.standbys.member,
        },
        lags: TaskLags {
            task: input.lags.task,
            member: input.lags.member,
            lag: input.lags.lag,
        },
        params: input.params.into_iter().map(|p| (p.key, p.value)).collect(),
        load_unit: input.load_unit,
        loads: TaskLoads {
            task: input.loads.task,
            load: input.loads.load,
        },
    };
    let answer = A::assign(&input);
    // The host drops the instance, its memory with it, after the call:
    // freeing the input (a string per member) one block at a time would
    // be work for nothing.
    std::mem::forget(input);
    match answer {
        Ok(Assignment {
            active_owner,
            learners,
            standbys,
        }) => Ok(wit::Assignment {
            active_owner,
            learners: wit::TaskMembers {
                task: learners.task,
                member: learners.member,
            },
            standbys: wit::TaskMembers {
                task: standbys.task,
                member: standbys.member,
            },
        }),
        Err(AssignError::InvalidParam(m)) => Err(wit::AssignError::InvalidParam(m)),
        Err(AssignError::UnsupportedInput(m)) => Err(wit::AssignError::UnsupportedInput(m)),
        Err(AssignError::Failed(m)) => Err(wit::AssignError::Failed(m)),
    }
}
