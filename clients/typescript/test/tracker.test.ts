/** The tracker's rules, as the Rust tracker's own tests state them, and the retry backoff. */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { retryBackoffMs } from "../src/machine";
import { task, Task } from "../src/task";
import { Change, Tracker } from "../src/tracker";
import { HeartbeatResponse } from "../src/wire";

const t = (...ps: number[]): Task[] => ps.map((p) => task("orders", p));

function answer(active: number[], revoking: number[] = [], learner: number[] = [], epoch = 1): HeartbeatResponse {
  return {
    memberId: "m",
    memberEpoch: epoch,
    heartbeatIntervalMs: 100,
    active: t(...active),
    revoking: t(...revoking),
    learner: t(...learner),
    standby: [],
    draining: false,
    drained: false,
    leaseMs: null,
    unreachedLeaseMs: null,
    unreachedFlightMs: null,
    loadReport: "none",
  };
}

describe("the tracker", () => {
  it("reports a revocation owned until it is acknowledged", () => {
    const tracker = new Tracker();
    assert.deepEqual(tracker.onResponse(answer([0, 1])), [{ type: "assigned", tasks: t(0, 1) }]);
    assert.deepEqual(tracker.onResponse(answer([0], [1])), [{ type: "revoked", ack: 0, tasks: t(1) }]);
    assert.deepEqual(tracker.owned(), t(0, 1));
    assert.deepEqual(tracker.onResponse(answer([0], [1])), [], "nothing new before the ack");
    assert.deepEqual(tracker.onAck(0), { known: true, changes: [] });
    assert.deepEqual(tracker.owned(), t(0));
    assert.deepEqual(tracker.onAck(0), { known: false, changes: [] }, "twice is a no-op");
  });

  it("promotes a learner that becomes active, keeping it while it waits for its release", () => {
    const tracker = new Tracker();
    tracker.onResponse(answer([0], [], [5], 1));
    assert.deepEqual(tracker.onResponse(answer([0], [], [], 2)), []);
    assert.deepEqual(tracker.assignment().learner, t(5), "still warming");
    const changes: Change[] = tracker.onResponse(answer([0, 5, 6], [], [], 2));
    assert.deepEqual(changes, [
      { type: "promoted", tasks: t(5) },
      { type: "assigned", tasks: t(6) },
    ]);
    assert.deepEqual(tracker.assignment().learner, []);
  });

  it("stops a dropped learner when the epoch moves on or after ten answers", () => {
    const tracker = new Tracker();
    tracker.onResponse(answer([0], [], [5, 6], 1));
    assert.deepEqual(tracker.onResponse(answer([0], [], [6], 2)), []);
    assert.deepEqual(tracker.onResponse(answer([0], [], [6], 3)), [{ type: "learner_stopped", tasks: t(5) }]);
    assert.deepEqual(tracker.onResponse(answer([0], [], [], 3)), []);
    for (let i = 1; i < 10; i++) assert.deepEqual(tracker.onResponse(answer([0], [], [], 3)), []);
    assert.deepEqual(tracker.onResponse(answer([0], [], [], 3)), [{ type: "learner_stopped", tasks: t(6) }]);
  });

  it("grants a task given back while releasing only after the ack", () => {
    const tracker = new Tracker();
    tracker.onResponse(answer([0, 1]));
    tracker.onResponse(answer([0], [1]));
    assert.deepEqual(tracker.onResponse(answer([0, 1])), []);
    assert.deepEqual(tracker.onAck(0), { known: true, changes: [{ type: "assigned", tasks: t(1) }] });
  });

  it("never reports a task the host no longer holds, and resets keeping ack ids unique", () => {
    const tracker = new Tracker();
    tracker.onResponse(answer([0, 1, 2]));
    tracker.onResponse(answer([0, 1], [2]));
    assert.deepEqual(tracker.onResponse(answer([0])), [{ type: "lost", tasks: t(1) }]);
    assert.deepEqual(tracker.owned(), t(0));
    assert.deepEqual(tracker.reset(), t(0, 2));
    tracker.onResponse(answer([7]));
    assert.deepEqual(tracker.onResponse(answer([], [7])), [{ type: "revoked", ack: 1, tasks: t(7) }]);
  });
});

describe("the retry backoff", () => {
  it("doubles from 50 ms up to a second and never past the interval", () => {
    assert.deepEqual(
      [1, 2, 3, 4, 5, 6, 7, 8].map((f) => retryBackoffMs(f, 3_000)),
      [50, 100, 200, 400, 800, 1000, 1000, 1000],
    );
    assert.equal(retryBackoffMs(1_000_000, 3_000), 1_000);
    assert.equal(retryBackoffMs(4, 300), 300);
  });
});
