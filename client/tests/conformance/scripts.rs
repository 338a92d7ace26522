//! The scripts the vectors are made from, one per rule of the member
//! machine (`clients/conformance/README.md`, "The rules"), with the edge
//! cases the simulator and the end-to-end tests found.

use std::collections::BTreeMap;

use assignd_client::machine::{Failure, MachineConfig};
use assignd_client::wire::LagRow;

use super::script::{Answer, Input, Script, dynamic, named, orders, refused, task};

pub fn all() -> Vec<Script> {
    let mut scripts = joining();
    scripts.extend(rebalancing());
    scripts.extend(leases());
    scripts.extend(failures());
    scripts.extend(refusals());
    scripts.extend(leaving());
    scripts.extend(endpoints());
    scripts.extend(super::load_scripts::all());
    scripts
}

/// A member joined at 0 (answered at 10) holding `active` at epoch 1.
fn joined(script: Script, active: &[u32]) -> Script {
    script.poll(0).answer(10, Answer::new(1, orders(active)))
}

fn joining() -> Vec<Script> {
    vec![
        Script::new(
            "join_then_heartbeat",
            "A join sends epoch 0, the chosen id and the topics; the answer tells joined then \
             assigned; the next heartbeat is due an interval after the join was sent and \
             reports the tasks owned as ranges, without topics.",
            dynamic(),
        )
        .poll(0)
        .poll(0)
        .answer(20, Answer::new(1, orders(&[0, 1, 2, 5])))
        .check(20, orders(&[0, 3]))
        .poll(500)
        .poll(1000)
        .answer(1010, Answer::new(1, orders(&[0, 1, 2, 5])))
        .check(3500, orders(&[0])),
        Script::new(
            "a_static_join_carries_name_rack_and_capacity",
            "A static member sends its name on every request, and its rack and capacity.",
            assignd_client::machine::MachineConfig {
                rack: Some("az-1".into()),
                capacity: 4,
                ..named()
            },
        )
        .poll(0)
        .answer(10, Answer::new(1, orders(&[0])))
        .poll(1000),
        Script::new(
            "a_lost_join_answer_is_retried_with_the_same_id",
            "A join that got no answer may have been handled: it is sent again with the same \
             member id, after a backoff counted from its send time, so the host answers it \
             as the same member.",
            dynamic(),
        )
        .poll(0)
        .fail(5_000, Failure::NoAnswer)
        .poll(5_000)
        .answer(5_010, Answer::new(1, orders(&[0]))),
        Script::new(
            "task_lists_read_as_pairs_or_ranges",
            "An answer's task lists may be pairs or ranges; owned is always sent as ranges, \
             each run of consecutive partitions of a topic as one.",
            assignd_client::machine::MachineConfig {
                topics: vec!["orders".into(), "payments".into()],
                ..dynamic()
            },
        )
        .poll(0)
        .answer(
            10,
            Answer::new(
                1,
                vec![
                    task("orders", 0),
                    task("orders", 1),
                    task("orders", 2),
                    task("orders", 3),
                    task("payments", 7),
                    task("payments", 9),
                ],
            )
            .pairs(),
        )
        .poll(1_000)
        .answer(
            1_010,
            Answer::new(1, vec![task("orders", 0), task("payments", 7)]).revoking(vec![
                task("orders", 1),
                task("orders", 2),
                task("orders", 3),
            ]),
        )
        .poll(2_000),
        Script::new(
            "the_interval_is_at_least_10_ms",
            "A host naming a shorter interval is followed at 10 ms.",
            dynamic(),
        )
        .poll(0)
        .answer(5, Answer::new(1, orders(&[0])).interval(1))
        .poll(9)
        .poll(10),
    ]
}

fn rebalancing() -> Vec<Script> {
    vec![
        joined(
            Script::new(
                "revoke_then_ack",
                "A revoked task is still processed and reported owned until the application \
                 acks; the ack sends a heartbeat at once without it; a second ack of the \
                 same id changes nothing.",
                dynamic(),
            ),
            &[0, 1],
        )
        .poll(1_000)
        .answer(1_010, Answer::new(2, orders(&[0])).revoking(orders(&[1])))
        .check(1_010, orders(&[0, 1]))
        .poll(1_500)
        .at(1_600, Input::Ack(0))
        .check(1_600, orders(&[1]))
        .poll(1_600)
        .answer(1_610, Answer::new(2, orders(&[0])))
        .at(1_700, Input::Ack(0)),
        joined(
            Script::new(
                "an_ack_while_a_heartbeat_is_in_flight_goes_after_its_answer",
                "An ack (or a drain) that comes while a heartbeat is in flight is sent as \
                 soon as that heartbeat's answer came, not an interval later.",
                dynamic(),
            ),
            &[0, 1],
        )
        .poll(1_000)
        .answer(1_010, Answer::new(2, orders(&[0])).revoking(orders(&[1])))
        .poll(2_000)
        .at(2_005, Input::Ack(0))
        .at(2_006, Input::Drain)
        .answer(2_010, Answer::new(2, orders(&[0])).revoking(orders(&[1])))
        .poll(2_010)
        .answer(2_020, Answer::new(2, orders(&[0])).draining())
        .poll(2_100),
        joined(
            Script::new(
                "a_task_given_back_while_releasing_waits_for_the_ack",
                "A task the host gives back while the application still releases it is \
                 granted only after the ack.",
                dynamic(),
            ),
            &[0, 1],
        )
        .poll(1_000)
        .answer(1_010, Answer::new(2, orders(&[0])).revoking(orders(&[1])))
        .poll(2_000)
        .answer(2_010, Answer::new(3, orders(&[0, 1])))
        .at(2_100, Input::Ack(0))
        .poll(2_100),
        Script::new(
            "a_learner_warms_up_then_is_promoted",
            "A learner reports its lag; once caught up the host lists it nowhere while its \
             old owner releases it, and the member keeps warming it; granted, it is \
             promoted, not assigned.",
            dynamic(),
        )
        .poll(0)
        .answer(10, Answer::new(1, orders(&[0])).learner(orders(&[1])))
        .at(
            100,
            Input::ReportLags(vec![LagRow("orders".into(), 1, 500)]),
        )
        .poll(1_000)
        .answer(1_010, Answer::new(2, orders(&[0])))
        .at(
            1_100,
            Input::ReportLags(vec![LagRow("orders".into(), 1, 0)]),
        )
        .poll(2_000)
        .answer(2_010, Answer::new(2, orders(&[0, 1])))
        .check(2_010, orders(&[1])),
        Script::new(
            "a_dropped_learner_stops_when_a_newer_target_leaves_it_out",
            "A learner the answers stop listing is kept until an answer at a higher epoch \
             still leaves it out.",
            dynamic(),
        )
        .poll(0)
        .answer(10, Answer::new(1, orders(&[0])).learner(orders(&[1, 2])))
        .poll(1_000)
        .answer(1_010, Answer::new(2, orders(&[0])).learner(orders(&[2])))
        .poll(2_000)
        .answer(2_010, Answer::new(3, orders(&[0])).learner(orders(&[2]))),
        Script::new(
            "standbys_start_stop_and_promote",
            "Standbys start, are promoted when they become active, and stop when a newer \
             target leaves them out.",
            dynamic(),
        )
        .poll(0)
        .answer(10, Answer::new(1, orders(&[0])).standby(orders(&[1, 2])))
        .poll(1_000)
        .answer(1_010, Answer::new(2, orders(&[0, 1])))
        .poll(2_000)
        .answer(2_010, Answer::new(3, orders(&[0, 1]))),
    ]
}

fn leases() -> Vec<Script> {
    let cluster =
        |epoch, active: &[u32]| Answer::new(epoch, orders(active)).lease(3_000, 8_000, 4_000);
    vec![
        Script::new(
            "the_lease_counts_from_the_send_time_and_runs_out_in_flight",
            "The lease counts from when the heartbeat was sent, not answered; when it runs \
             out (here while the next heartbeat is in flight) every task is lost, the id \
             kept; the next answer assigns them again.",
            dynamic(),
        )
        .poll(0)
        .answer(2_500, Answer::new(1, orders(&[0, 1])))
        .poll(2_500)
        .check(2_999, orders(&[0]))
        .check(3_000, orders(&[0]))
        .at(3_000, Input::Tick)
        .answer(3_100, Answer::new(1, orders(&[0, 1]))),
        Script::new(
            "an_answer_whose_lease_is_over_on_arrival_grants_nothing_to_process",
            "An answer that arrives after its own lease: its tasks are lost at the next tick.",
            dynamic(),
        )
        .poll(0)
        .answer(4_000, Answer::new(1, orders(&[0])))
        .check(4_000, orders(&[0]))
        .at(4_000, Input::Tick),
        Script::new(
            "an_unreached_coordinator_keeps_the_tasks_on_the_unreached_lease",
            "While every heartbeat since the last answer reached no coordinator (a node died \
             and its shard is being taken over), the member keeps its tasks on the unreached \
             lease; a heartbeat in flight counts on it only until its send time plus the \
             flight bound.",
            dynamic(),
        )
        .poll(0)
        .answer(10, cluster(1, &[0]))
        .poll(1_000)
        .fail(1_000, Failure::Unreached)
        .check(5_000, orders(&[0]))
        .poll(5_000)
        .check(5_000, orders(&[0]))
        .fail(5_010, Failure::Unreached)
        .poll(7_000)
        .at(8_000, Input::Tick)
        .check(8_000, orders(&[0]))
        .fail(8_100, Failure::Unreached)
        .poll(8_500)
        .answer(8_510, cluster(1, &[0])),
        Script::new(
            "a_failure_that_may_have_reached_the_coordinator_ends_the_unreached_lease",
            "After a failure that may have reached the coordinator (no answer), only the \
             plain lease counts until the next answer, whatever the later failures.",
            dynamic(),
        )
        .poll(0)
        .answer(10, cluster(1, &[0]))
        .poll(1_000)
        .fail(1_000, Failure::Unreached)
        .poll(1_050)
        .fail(1_100, Failure::NoAnswer)
        .poll(1_150)
        .fail(1_160, Failure::Unreached)
        .at(3_000, Input::Tick),
        Script::new(
            "an_unreached_heartbeat_in_flight_past_its_flight_bound",
            "On the unreached lease, a heartbeat in flight bounds it at its send time plus \
             the flight bound: the tasks stop there even though the unreached lease is \
             longer; its timeout (no answer) brings the plain lease back.",
            dynamic(),
        )
        .poll(0)
        .answer(10, Answer::new(1, orders(&[0])).lease(3_000, 8_000, 2_000))
        .poll(1_000)
        .fail(1_000, Failure::Unreached)
        .poll(2_500)
        .at(4_500, Input::Tick)
        .fail(7_500, Failure::NoAnswer)
        .poll(7_500)
        .answer(7_510, Answer::new(1, orders(&[0]))),
        joined(
            Script::new(
                "no_unreached_lease_while_a_task_is_being_released",
                "While a revoked task is not acked, an unreached failure does not extend the \
                 lease: the host may fence the member for the task first.",
                dynamic(),
            ),
            &[0, 1],
        )
        .poll(1_000)
        .answer(
            1_010,
            Answer::new(2, orders(&[0]))
                .revoking(orders(&[1]))
                .lease(3_000, 8_000, 4_000),
        )
        .poll(2_000)
        .fail(2_000, Failure::Unreached),
        Script::new(
            "a_host_without_a_flight_bound_gives_no_unreached_lease",
            "An answer without unreached_flight_ms (a host before it) never puts the member \
             on the unreached lease.",
            dynamic(),
        )
        .poll(0)
        .answer(10, cluster(1, &[0]).no_flight_bound())
        .poll(1_000)
        .fail(1_000, Failure::Unreached),
    ]
}

fn failures() -> Vec<Script> {
    let server = |retry_after_ms| Failure::Server {
        status: 503,
        retry_after_ms,
    };
    // A long interval and lease: the backoff stays under both.
    let steady = || {
        Answer::new(1, orders(&[0]))
            .interval(5_000)
            .lease(20_000, 20_000, 10_000)
    };
    let mut backoff = Script::new(
        "failures_back_off_doubling_to_a_second",
        "Retries wait 50 ms doubling up to 1 s (never past the interval), counted from \
         the failed request's send time; an answer resets the backoff.",
        dynamic(),
    )
    .poll(0)
    .answer(10, steady())
    .poll(5_000);
    let mut at = 5_000;
    for wait in [50, 100, 200, 400, 800, 1_000] {
        backoff = backoff.fail(at, server(None)).poll(at + wait);
        at += wait;
    }
    backoff = backoff
        .answer(at + 5, steady())
        .poll(at + 5_000)
        .fail(at + 5_000, server(None));
    vec![
        backoff,
        Script::new(
            "retry_after_on_a_join_is_honoured_in_full",
            "A join refused with Retry-After (a join rate limit) waits that long, counted \
             from the refusal, with the same id.",
            dynamic(),
        )
        .poll(0)
        .fail(
            10,
            Failure::Refused {
                status: 429,
                code: "join_rate_limited".into(),
                retry_after_ms: Some(5_000),
            },
        )
        .poll(5_009)
        .poll(5_010),
        joined(
            Script::new(
                "retry_after_of_a_joined_member_waits_at_most_its_interval",
                "A joined member waits out a Retry-After no longer than its interval, so its \
                 session holds.",
                dynamic(),
            ),
            &[0],
        )
        .poll(1_000)
        .fail(1_010, server(Some(30_000)))
        .poll(2_009)
        .poll(2_010),
    ]
}

fn refusals() -> Vec<Script> {
    vec![
        joined(
            Script::new(
                "a_fenced_member_loses_its_tasks_and_rejoins_as_a_new_member",
                "Fenced: every task is lost, the member rejoins at once with a new id.",
                dynamic(),
            ),
            &[0, 1],
        )
        .poll(1_000)
        .fail(1_010, refused(409, "fenced"))
        .poll(1_010),
        joined(
            Script::new(
                "a_draining_member_that_is_fenced_stops",
                "A member fenced while draining does not rejoin: it stops, fenced.",
                dynamic(),
            ),
            &[0],
        )
        .at(100, Input::Drain)
        .poll(100)
        .answer(110, Answer::new(1, orders(&[0])).draining())
        .poll(1_100)
        .fail(1_110, refused(409, "fenced"))
        .poll(1_200),
        Script::new(
            "a_join_refused_fenced_joins_again_with_a_new_id",
            "A retried join whose id the host already removed is refused fenced: the next \
             join chooses a new id.",
            dynamic(),
        )
        .poll(0)
        .fail(10, refused(409, "fenced"))
        .poll(50),
        joined(
            Script::new(
                "a_replaced_member_stops_without_rejoining",
                "Another process joined with this member's name: every task is lost and the \
                 member stops, since a rejoin would fence the other in turn.",
                named(),
            ),
            &[0, 1],
        )
        .poll(1_000)
        .fail(1_010, refused(409, "replaced"))
        .poll(1_010),
        Script::new(
            "a_retried_join_refused_replaced_stops",
            "A join whose answer was lost, retried after another process took the name, is \
             refused replaced: the member stops, it does not retry for ever.",
            named(),
        )
        .poll(0)
        .fail(5_000, Failure::NoAnswer)
        .poll(5_000)
        .fail(5_010, refused(409, "replaced"))
        .poll(5_100),
        joined(
            Script::new(
                "an_unknown_member_rejoins_at_once",
                "The host no longer knows the member: its tasks are lost and it joins anew.",
                dynamic(),
            ),
            &[0],
        )
        .poll(1_000)
        .fail(1_010, refused(404, "unknown_member"))
        .poll(1_010),
        joined(
            Script::new(
                "an_unknown_group_rejoins_after_a_backoff",
                "The group is gone: tasks lost, the join is retried with a backoff.",
                dynamic(),
            ),
            &[0],
        )
        .poll(1_000)
        .fail(1_010, refused(404, "unknown_group"))
        .poll(1_010)
        .poll(1_050),
        joined(
            Script::new(
                "a_static_member_with_a_stale_epoch_rejoins_keeping_its_tasks",
                "A static member whose epoch went stale rejoins under its name with what it \
                 holds: nothing is lost and nothing is assigned again.",
                named(),
            ),
            &[0, 1],
        )
        .poll(1_000)
        .fail(1_010, refused(409, "stale_epoch"))
        .poll(1_010)
        .answer(1_020, Answer::new(2, orders(&[0, 1])).id("c-test-2")),
        joined(
            Script::new(
                "a_dynamic_member_with_a_stale_epoch_frees_its_slot_then_rejoins",
                "A dynamic member whose epoch went stale loses its tasks, leaves under its old \
                 id (freeing them now, not at its session timeout), then joins as a new member.",
                dynamic(),
            ),
            &[0],
        )
        .poll(1_000)
        .fail(1_010, refused(409, "stale_epoch"))
        .poll(1_010)
        .answer(1_020, Answer::left())
        .poll(1_020),
    ]
}

fn leaving() -> Vec<Script> {
    vec![
        joined(
            Script::new(
                "a_drain_ends_in_a_leave",
                "A drain is asked at once; tasks are revoked as they move; once drained the \
                 member leaves and stops, drained.",
                dynamic(),
            ),
            &[0, 1],
        )
        .at(100, Input::Drain)
        .poll(100)
        .answer(
            110,
            Answer::new(2, orders(&[0]))
                .revoking(orders(&[1]))
                .draining(),
        )
        .at(200, Input::Ack(0))
        .poll(200)
        .answer(
            210,
            Answer::new(3, Vec::new()).revoking(orders(&[0])).draining(),
        )
        .at(300, Input::Ack(1))
        .poll(300)
        .answer(310, Answer::new(3, Vec::new()).draining().drained())
        .poll(310)
        .answer(320, Answer::left())
        .poll(400),
        joined(
            Script::new(
                "a_leave_is_tried_three_times",
                "A leave that gets no answer is sent again 100 ms, then 200 ms later; after \
                 the third the member stops anyway.",
                dynamic(),
            ),
            &[0],
        )
        .at(500, Input::Leave)
        .poll(500)
        .fail(600, Failure::NoAnswer)
        .poll(700)
        .fail(
            710,
            Failure::Server {
                status: 503,
                retry_after_ms: None,
            },
        )
        .poll(910)
        .fail(920, Failure::NoAnswer)
        .poll(1_000),
        joined(
            Script::new(
                "a_leave_refused_as_already_out_ends_it",
                "A leave refused unknown_member (the member was out already) ends it cleanly.",
                dynamic(),
            ),
            &[0],
        )
        .at(500, Input::Leave)
        .poll(500)
        .fail(510, refused(404, "unknown_member")),
        Script::new(
            "a_leave_before_joining_stops_at_once",
            "A member that never joined has nothing to leave.",
            dynamic(),
        )
        .at(0, Input::Leave)
        .poll(0),
        joined(
            Script::new(
                "a_leave_asked_while_a_heartbeat_is_in_flight_goes_after_its_answer",
                "A leave asked while a heartbeat is in flight is sent once its answer came.",
                dynamic(),
            ),
            &[0, 1],
        )
        .poll(1_000)
        .at(1_005, Input::Leave)
        .poll(1_005)
        .answer(1_010, Answer::new(1, orders(&[0, 1])))
        .poll(1_010)
        .answer(1_020, Answer::left()),
    ]
}

fn metadata(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
        .collect()
}

fn endpoints() -> Vec<Script> {
    let publishing = MachineConfig {
        endpoint: Some("http://10.0.0.5:8080".into()),
        metadata: metadata(&[("zone", "a")]),
        ..dynamic()
    };
    vec![
        Script::new(
            "a_member_publishes_its_endpoint_and_changes_it",
            "A join carries the endpoint and metadata set (each left out when unset); a \
             heartbeat carries neither until set_endpoint changes them. Then the next request \
             carries both (endpoint \"\" for none, metadata {} for empty), and so does every \
             later one until an answer arrives to one that carried them: a failed one's \
             successor carries them again, and an answer to a request sent before the change \
             does not count. A leave never carries them.",
            publishing,
        )
        .poll(0)
        .answer(10, Answer::new(1, orders(&[0])))
        .poll(1_000)
        .answer(1_010, Answer::new(1, orders(&[0])))
        .at(
            1_500,
            Input::SetEndpoint(Some("http://10.0.0.5:9090".into()), BTreeMap::new()),
        )
        .poll(2_000)
        .fail(2_010, Failure::NoAnswer)
        .poll(2_050)
        .answer(2_060, Answer::new(1, orders(&[0])))
        .poll(3_050)
        .at(3_055, Input::SetEndpoint(None, metadata(&[("zone", "b")])))
        .answer(3_060, Answer::new(1, orders(&[0])))
        .poll(4_050)
        .fail(4_060, refused(409, "fenced"))
        .poll(4_060)
        .answer(4_070, Answer::new(3, orders(&[0])).id("c-test-2"))
        .poll(5_070)
        .fail(5_080, refused(409, "fenced"))
        .poll(5_080)
        .answer(5_090, Answer::new(5, orders(&[0])).id("c-test-3"))
        .at(5_100, Input::Leave)
        .poll(5_100)
        .answer(5_110, Answer::left()),
    ]
}
