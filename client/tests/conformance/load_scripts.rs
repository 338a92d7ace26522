//! The scripts of the load rule (`clients/conformance/README.md`, "Loads"):
//! nothing is sent until an answer asks, everything known on `full`, what
//! moved past the threshold on `changes`, resent until answered, forgotten
//! with the task.

use assignd_client::Task;
use assignd_client::machine::Failure;

use super::script::{Answer, Input, Script, dynamic, orders, refused, task};

fn loads(rows: &[(u32, f64)]) -> Input {
    Input::SetLoads(
        rows.iter()
            .map(|&(partition, load)| (task("orders", partition), load))
            .collect::<Vec<(Task, f64)>>(),
    )
}

pub fn all() -> Vec<Script> {
    vec![reports_after_the_host_asks(), rejoins_and_threshold()]
}

fn reports_after_the_host_asks() -> Script {
    let held = || Answer::new(1, orders(&[0, 1, 2, 3]));
    let kept = || Answer::new(1, orders(&[0, 1, 2]));
    Script::new(
        "a_member_reports_load_after_the_host_asks",
        "Loads set before any answer asked for them are not sent (an older host refuses the \
         fields); a load for a task not active here is ignored. After load_report \"full\" \
         the next heartbeat carries every known load of an active task, consecutive \
         partitions of equal load as one range, and the utilisation and load capacity set. \
         After \"changes\" it carries only loads that moved by more than 10 % of the value \
         the host acknowledged, and the utilisation when it moved by more than 0.05. A \
         heartbeat that got no answer is not acknowledged: the next carries its values again. \
         A revoked task's load is forgotten. \"full\" again (a new coordinator) sends \
         everything known again; \"none\" (or no load_report) sends nothing.",
        dynamic(),
    )
    .poll(0)
    .answer(10, held())
    .at(
        500,
        loads(&[(0, 100.0), (1, 100.0), (2, 100.0), (3, 40.0), (7, 5.0)]),
    )
    .at(500, Input::SetUtilisation(Some(0.5)))
    .at(500, Input::SetLoadCapacity(Some(1_000.0)))
    .poll(1_000)
    .answer(1_010, held().load_report("full"))
    .poll(2_000)
    .answer(2_010, held().load_report("changes"))
    .at(2_500, loads(&[(0, 109.0), (1, 120.0), (3, 30.0)]))
    .at(2_500, Input::SetUtilisation(Some(0.53)))
    .poll(3_000)
    .fail(3_010, Failure::NoAnswer)
    .at(3_020, Input::SetUtilisation(Some(0.6)))
    .poll(3_050)
    .answer(3_060, kept().revoking(orders(&[3])).load_report("changes"))
    .at(3_070, Input::Ack(0))
    .poll(3_070)
    .answer(3_080, kept().load_report("changes"))
    .poll(4_070)
    .answer(4_080, kept().load_report("full"))
    .poll(5_070)
    .answer(5_080, kept().load_report("none"))
    .at(5_500, loads(&[(0, 500.0)]))
    .poll(6_070)
    .answer(6_080, kept())
    .poll(7_070)
}

fn rejoins_and_threshold() -> Script {
    Script::new(
        "a_rejoined_member_reports_again_under_its_threshold",
        "With a load_threshold of 0.5 a load is sent again only once it moved by more than \
         half the acknowledged value. A fenced member loses its tasks and their loads; its \
         join carries no load fields, and after the new member's \"full\" it reports only \
         what the application set since. A load never acknowledged goes with the next \
         \"changes\". A leave carries no load fields.",
        dynamic(),
    )
    .load_threshold(0.5)
    .poll(0)
    .answer(10, Answer::new(1, orders(&[0, 1])).load_report("full"))
    .at(20, loads(&[(0, 10.0), (1, 10.0)]))
    .poll(1_000)
    .answer(
        1_010,
        Answer::new(1, orders(&[0, 1])).load_report("changes"),
    )
    .at(1_500, loads(&[(0, 14.0), (1, 16.0)]))
    .poll(2_000)
    .fail(2_010, refused(409, "fenced"))
    .poll(2_010)
    .answer(
        2_020,
        Answer::new(3, orders(&[0, 1]))
            .id("c-test-2")
            .load_report("full"),
    )
    .poll(3_010)
    .at(3_015, loads(&[(0, 14.0), (1, 16.0)]))
    .answer(
        3_020,
        Answer::new(3, orders(&[0, 1]))
            .id("c-test-2")
            .load_report("changes"),
    )
    .poll(4_010)
    .answer(
        4_020,
        Answer::new(3, orders(&[0, 1]))
            .id("c-test-2")
            .load_report("changes"),
    )
    .at(4_100, Input::Leave)
    .poll(4_100)
    .answer(4_110, Answer::left())
}
