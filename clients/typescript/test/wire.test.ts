/** Task ranges both ways, the request and answer bodies, and the error body. */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { readTasks, TASKS_PER_LIST_MAX, WireError, writeTasks } from "../src/ranges";
import { compareTasks, compareTopics, task, TaskSet } from "../src/task";
import { decodeError, decodeResponse, encodeRequest, HeartbeatRequest } from "../src/wire";

const orders = (...ps: number[]) => ps.map((p) => task("orders", p));

describe("task ranges", () => {
  it("write runs of consecutive partitions as ranges and a lone task as a pair", () => {
    const tasks = [...orders(0, 1, 2, 7), task("payments", 3), task("payments", 4), task("refunds", 9)];
    assert.deepEqual(writeTasks(tasks), [
      ["orders", 0, 2],
      ["orders", 7],
      ["payments", 3, 4],
      ["refunds", 9],
    ]);
    assert.deepEqual(writeTasks(tasks, false).length, tasks.length);
    assert.deepEqual(writeTasks([]), []);
  });

  it("write a million tasks in a few bytes", () => {
    const million = [];
    for (let t = 0; t < 10; t++) for (let p = 0; p < 100_000; p++) million.push(task(`topic-${t}`, p));
    assert.ok(JSON.stringify(writeTasks(million)).length < 1_000);
  });

  it("read ranges and pairs alike, and back to what was written", () => {
    const ranged = readTasks([["orders", 0, 2], ["orders", 7], ["payments", 1, 3]]);
    const paired = readTasks([["orders", 0], ["orders", 1], ["orders", 2], ["orders", 7], ["payments", 1], ["payments", 2], ["payments", 3]]);
    assert.deepEqual(ranged, paired);
    assert.deepEqual(readTasks(writeTasks(ranged)), ranged);
    assert.deepEqual(readTasks(null), []);
    assert.deepEqual(readTasks(undefined), []);
  });

  it("refuse a range that ends before it starts, bad items and too many tasks", () => {
    assert.throws(() => readTasks([["orders", 3, 1]]), /ends before it starts/);
    assert.throws(() => readTasks([["orders"]]), WireError);
    assert.throws(() => readTasks([["orders", 1, 2, 3]]), WireError);
    assert.throws(() => readTasks([[1, 2]]), WireError);
    assert.throws(() => readTasks([["orders", -1]]), WireError);
    assert.throws(() => readTasks([["orders", 1.5]]), WireError);
    assert.throws(() => readTasks({}), WireError);
    assert.throws(() => readTasks([["orders", 0, TASKS_PER_LIST_MAX]]), /more than/);
    assert.equal(readTasks([["orders", 0, TASKS_PER_LIST_MAX - 1]]).length, TASKS_PER_LIST_MAX);
  });
});

describe("tasks", () => {
  it("sort by topic in byte order, then partition", () => {
    // U+FF5E sorts before U+1F600 in UTF-8 but after it in UTF-16.
    assert.ok(compareTopics("\uff5e", "\u{1f600}") < 0);
    assert.ok(compareTopics("a", "ab") < 0);
    assert.ok(compareTasks(task("a", 10), task("a", 9)) > 0);
    const set = new TaskSet([task("b", 1), task("a", 2), task("a", 1), task("a", 2)]);
    assert.deepEqual(set.toArray(), [task("a", 1), task("a", 2), task("b", 1)]);
  });
});

describe("the request body", () => {
  const request: HeartbeatRequest = {
    memberId: "m",
    memberName: null,
    memberEpoch: 3,
    topics: null,
    rack: null,
    capacity: 1,
    owned: orders(0, 1, 2, 5),
    lags: [{ task: task("orders", 9), lag: 120 }],
    drain: false,
  };

  it("leaves absent fields out and sends owned as ranges", () => {
    assert.deepEqual(encodeRequest(request), {
      member_id: "m",
      member_epoch: 3,
      rack: null,
      capacity: 1,
      owned: [["orders", 0, 2], ["orders", 5]],
      lags: [["orders", 9, 120]],
      drain: false,
      task_ranges: true,
    });
  });

  it("carries a join's topics and a static member's name", () => {
    const join = encodeRequest({ ...request, memberEpoch: 0, topics: ["orders"], memberName: "worker-a", rack: "r1" });
    assert.equal(join.member_name, "worker-a");
    assert.deepEqual(join.topics, ["orders"]);
    assert.equal(join.rack, "r1");
  });
});

describe("the answer body", () => {
  const base = { member_id: "m", member_epoch: 4, heartbeat_interval_ms: 3000 };

  it("reads ranges and pairs as the same answer, and leases", () => {
    const ranged = decodeResponse({
      ...base,
      active: [["orders", 0, 2], ["orders", 7]],
      revoking: [["payments", 1, 3]],
      learner: [],
      standby: [["orders", 9]],
      lease_ms: 6000,
      unreached_lease_ms: 11000,
      unreached_flight_ms: 6000,
    });
    const paired = decodeResponse({
      ...base,
      active: [["orders", 0], ["orders", 1], ["orders", 2], ["orders", 7]],
      revoking: [["payments", 1], ["payments", 2], ["payments", 3]],
      learner: [],
      standby: [["orders", 9]],
      lease_ms: 6000,
      unreached_lease_ms: 11000,
      unreached_flight_ms: 6000,
    });
    assert.deepEqual(ranged, paired);
    assert.equal(ranged.active.length, 4);
    assert.equal(ranged.unreachedLeaseMs, 11000);
  });

  it("reads what an older host leaves out as empty, false or unknown", () => {
    const older = decodeResponse({ ...base, lease_ms: 6000, unreached_lease_ms: null });
    assert.deepEqual(older.active, []);
    assert.equal(older.draining, false);
    assert.equal(older.leaseMs, 6000);
    assert.equal(older.unreachedLeaseMs, null);
    assert.equal(older.unreachedFlightMs, null);
  });

  it("refuses what it cannot read", () => {
    assert.throws(() => decodeResponse([]), WireError);
    assert.throws(() => decodeResponse({ ...base, member_id: 1 }), WireError);
    assert.throws(() => decodeResponse({ ...base, member_epoch: -1 }), WireError);
    assert.throws(() => decodeResponse({ ...base, draining: "yes" }), WireError);
    assert.throws(() => decodeResponse({ ...base, active: [["orders", 2, 1]] }), WireError);
  });
});

describe("the error body", () => {
  it("reads the code and message, and nothing from other bodies", () => {
    assert.deepEqual(decodeError('{"error": {"code": "fenced", "message": "gone", "location": null}}'), {
      code: "fenced",
      message: "gone",
    });
    assert.equal(decodeError("<html>"), null);
    assert.equal(decodeError('{"error": "fenced"}'), null);
    assert.equal(decodeError('{"error": {"code": 1, "message": "x"}}'), null);
  });
});
