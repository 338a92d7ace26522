//! A conformance script: a timed list of inputs to the member machine, and
//! the vector it makes: every input with every output the machine gave
//! after it (the format is `clients/conformance/README.md`'s).

use std::collections::BTreeMap;

use assignd_client::Task;
use assignd_client::machine::{Failure, Machine, MachineConfig, Millis};
use assignd_client::wire::{HeartbeatResponse, LagRow};
use serde_json::{Value, json};

/// One input, at a time.
pub enum Input {
    PollRequest,
    Answer(Value),
    Failure(Failure),
    Ack(u64),
    ReportLags(Vec<LagRow>),
    Drain,
    Leave,
    Tick,
    Check(Vec<Task>),
    SetEndpoint(Option<String>, BTreeMap<String, String>),
    /// `[topic, partition, load]` rows.
    SetLoads(Vec<(Task, f64)>),
    SetUtilisation(Option<f64>),
    SetLoadCapacity(Option<f64>),
}

pub struct Script {
    name: &'static str,
    about: &'static str,
    config: MachineConfig,
    /// The config's `load_threshold`, when not the default.
    load_threshold: Option<f64>,
    steps: Vec<(Millis, Input)>,
}

pub fn task(topic: &str, partition: u32) -> Task {
    Task::new(topic, partition)
}

/// `orders` partitions.
pub fn orders(partitions: &[u32]) -> Vec<Task> {
    partitions.iter().map(|&p| task("orders", p)).collect()
}

/// A dynamic member subscribed to `orders`.
pub fn dynamic() -> MachineConfig {
    MachineConfig {
        member_name: None,
        topics: vec!["orders".into()],
        rack: None,
        capacity: 1,
        endpoint: None,
        metadata: BTreeMap::new(),
        id_prefix: "c-test".into(),
    }
}

/// A static member named `worker-a` subscribed to `orders`.
pub fn named() -> MachineConfig {
    MachineConfig {
        member_name: Some("worker-a".into()),
        ..dynamic()
    }
}

pub fn refused(status: u16, code: &str) -> Failure {
    Failure::Refused {
        status,
        code: code.into(),
        retry_after_ms: None,
    }
}

impl Script {
    pub fn new(name: &'static str, about: &'static str, config: MachineConfig) -> Self {
        Script {
            name,
            about,
            config,
            load_threshold: None,
            steps: Vec::new(),
        }
    }

    pub fn load_threshold(mut self, threshold: f64) -> Self {
        self.load_threshold = Some(threshold);
        self
    }

    pub fn name(&self) -> &str {
        self.name
    }

    pub fn at(mut self, at: Millis, input: Input) -> Self {
        if let Some((last, _)) = self.steps.last() {
            assert!(at >= *last, "{}: time goes forward", self.name);
        }
        self.steps.push((at, input));
        self
    }

    pub fn poll(self, at: Millis) -> Self {
        self.at(at, Input::PollRequest)
    }

    pub fn answer(self, at: Millis, answer: Answer) -> Self {
        self.at(at, Input::Answer(answer.json()))
    }

    pub fn fail(self, at: Millis, failure: Failure) -> Self {
        self.at(at, Input::Failure(failure))
    }

    pub fn check(self, at: Millis, tasks: Vec<Task>) -> Self {
        self.at(at, Input::Check(tasks))
    }

    /// Runs the script on a fresh machine (created at time 0) and writes
    /// its vector.
    pub fn vector(&self) -> Value {
        let mut machine = Machine::new(self.config.clone(), 0);
        let mut config = json!(self.config);
        if let Some(threshold) = self.load_threshold {
            machine = machine.with_load_threshold(threshold);
            config["load_threshold"] = json!(threshold);
        }
        let steps: Vec<Value> = self
            .steps
            .iter()
            .map(|(at, input)| step(&mut machine, *at, input, self.name))
            .collect();
        json!({
            "name": self.name,
            "about": self.about,
            "config": config,
            "steps": steps,
        })
    }
}

fn step(machine: &mut Machine, at: Millis, input: &Input, name: &str) -> Value {
    let mut expect = serde_json::Map::new();
    let input = match input {
        Input::PollRequest => {
            let request = machine.poll_request(at);
            expect.insert("request".into(), json!(request));
            json!({"type": "poll_request"})
        }
        Input::Answer(body) => {
            let response: HeartbeatResponse = serde_json::from_value(body.clone())
                .unwrap_or_else(|e| panic!("{name}: an answer the client cannot read: {e}"));
            assert!(
                machine.in_flight(),
                "{name}: an answer at {at} with nothing in flight"
            );
            machine.on_answer(&response, at);
            json!({"type": "answer", "body": body})
        }
        Input::Failure(failure) => {
            assert!(
                machine.in_flight(),
                "{name}: a failure at {at} with nothing in flight"
            );
            machine.on_failure(failure, at);
            json!({"type": "failure", "failure": failure})
        }
        Input::Ack(ack) => {
            machine.ack(*ack, at);
            json!({"type": "ack", "ack": ack})
        }
        Input::ReportLags(lags) => {
            machine.report_lags(lags.clone());
            json!({"type": "report_lags", "lags": lags})
        }
        Input::Drain => {
            machine.drain(at);
            json!({"type": "drain"})
        }
        Input::Leave => {
            machine.leave(at);
            json!({"type": "leave"})
        }
        Input::Tick => {
            machine.tick(at);
            json!({"type": "tick"})
        }
        Input::SetEndpoint(endpoint, metadata) => {
            machine.set_endpoint(endpoint.clone(), metadata.clone());
            json!({"type": "set_endpoint", "endpoint": endpoint, "metadata": metadata})
        }
        Input::SetLoads(loads) => {
            for (task, load) in loads {
                assert!(machine.set_load(task.clone(), *load), "{name}: load {load}");
            }
            let rows: Vec<Value> = loads
                .iter()
                .map(|(task, load)| json!([task.topic, task.partition, load]))
                .collect();
            json!({"type": "set_loads", "loads": rows})
        }
        Input::SetUtilisation(utilisation) => {
            assert!(machine.set_utilisation(*utilisation), "{name}");
            json!({"type": "set_utilisation", "utilisation": utilisation})
        }
        Input::SetLoadCapacity(capacity) => {
            assert!(machine.set_load_capacity(*capacity), "{name}");
            json!({"type": "set_load_capacity", "load_capacity": capacity})
        }
        Input::Check(tasks) => {
            let answers: Vec<bool> = tasks.iter().map(|t| machine.may_process(t, at)).collect();
            expect.insert("may_process".into(), json!(answers));
            json!({"type": "check", "may_process": tasks})
        }
    };
    let events: Vec<Value> = std::iter::from_fn(|| machine.poll_event())
        .map(|event| json!(event))
        .collect();
    let assignment = machine.assignment();
    expect.insert("events".into(), json!(events));
    expect.insert("timeout".into(), json!(machine.poll_timeout()));
    expect.insert("lease_until".into(), json!(machine.lease_until()));
    expect.insert("member_id".into(), json!(machine.member_id()));
    expect.insert("member_epoch".into(), json!(machine.member_epoch()));
    expect.insert(
        "assignment".into(),
        json!({
            "active": assignment.active,
            "revoking": assignment.revoking,
            "learner": assignment.learner,
            "standby": assignment.standby,
            "draining": assignment.draining,
        }),
    );
    expect.insert("stopped".into(), json!(machine.stopped()));
    json!({"at": at, "input": input, "expect": expect})
}

/// A 200 answer, as a host writes it.
#[derive(Clone)]
pub struct Answer {
    pub member_id: String,
    pub epoch: u64,
    pub interval_ms: u64,
    pub active: Vec<Task>,
    pub revoking: Vec<Task>,
    pub learner: Vec<Task>,
    pub standby: Vec<Task>,
    pub draining: bool,
    pub drained: bool,
    pub lease_ms: Option<u64>,
    pub unreached_lease_ms: Option<u64>,
    pub unreached_flight_ms: Option<u64>,
    /// `load_report`, left out when `None` (as a host without loads does).
    pub load_report: Option<&'static str>,
    /// Write the task lists as ranges (a host asked for `task_ranges`).
    pub ranges: bool,
}

impl Answer {
    /// Member `c-test-1` at `epoch`, holding `active`, beating every
    /// second, with a 3 s lease (a single node: the unreached lease is the
    /// same, and the flight bound an expansion timeout and an interval).
    pub fn new(epoch: u64, active: Vec<Task>) -> Self {
        Answer {
            member_id: "c-test-1".into(),
            epoch,
            interval_ms: 1_000,
            active,
            revoking: Vec::new(),
            learner: Vec::new(),
            standby: Vec::new(),
            draining: false,
            drained: false,
            lease_ms: Some(3_000),
            unreached_lease_ms: Some(3_000),
            unreached_flight_ms: Some(2_000),
            load_report: None,
            ranges: true,
        }
    }

    pub fn id(mut self, member_id: &str) -> Self {
        self.member_id = member_id.into();
        self
    }

    pub fn revoking(mut self, tasks: Vec<Task>) -> Self {
        self.revoking = tasks;
        self
    }

    pub fn learner(mut self, tasks: Vec<Task>) -> Self {
        self.learner = tasks;
        self
    }

    pub fn standby(mut self, tasks: Vec<Task>) -> Self {
        self.standby = tasks;
        self
    }

    pub fn lease(mut self, lease_ms: u64, unreached_lease_ms: u64, flight_ms: u64) -> Self {
        self.lease_ms = Some(lease_ms);
        self.unreached_lease_ms = Some(unreached_lease_ms);
        self.unreached_flight_ms = Some(flight_ms);
        self
    }

    pub fn interval(mut self, interval_ms: u64) -> Self {
        self.interval_ms = interval_ms;
        self
    }

    pub fn draining(mut self) -> Self {
        self.draining = true;
        self
    }

    pub fn drained(mut self) -> Self {
        self.drained = true;
        self
    }

    /// Asks for `report` of the member's loads: `"full"`, `"changes"` or
    /// `"none"`.
    pub fn load_report(mut self, report: &'static str) -> Self {
        self.load_report = Some(report);
        self
    }

    /// From a host before the flight bound.
    pub fn no_flight_bound(mut self) -> Self {
        self.unreached_flight_ms = None;
        self
    }

    /// Task lists as `[topic, partition]` items.
    pub fn pairs(mut self) -> Self {
        self.ranges = false;
        self
    }

    /// The answer to a leave.
    pub fn left() -> Self {
        Answer::new(0, Vec::new())
    }

    fn json(&self) -> Value {
        let list = |tasks: &[Task]| -> Value {
            let body = assignd_client::wire::HeartbeatResponseBody {
                active: tasks.to_vec(),
                task_ranges: self.ranges,
                ..Default::default()
            };
            serde_json::to_value(body).unwrap()["active"].clone()
        };
        let mut body = json!({
            "member_id": self.member_id,
            "member_epoch": self.epoch,
            "heartbeat_interval_ms": self.interval_ms,
            "active": list(&self.active),
            "revoking": list(&self.revoking),
            "learner": list(&self.learner),
            "standby": list(&self.standby),
            "draining": self.draining,
            "drained": self.drained,
            "lease_ms": self.lease_ms,
            "unreached_lease_ms": self.unreached_lease_ms,
            "unreached_flight_ms": self.unreached_flight_ms,
        });
        if let Some(report) = self.load_report {
            body["load_report"] = json!(report);
        }
        body
    }
}
