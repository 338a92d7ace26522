/**
 * The member shell against scripted fake hosts: revoke then ack (after an
 * async hook resolves), the lease running out while a heartbeat hangs, a
 * drain ending in a leave, and an AbortSignal leaving.
 */

import assert from "node:assert/strict";
import { after, describe, it } from "node:test";

import { MemberEvent } from "../src/events";
import { silentLogger } from "../src/logger";
import { Member } from "../src/member";
import { task, Task } from "../src/task";
import { answer, FakeHost, json, Seen } from "./fake-host";

const hosts: FakeHost[] = [];
after(async () => {
  await Promise.all(hosts.map((h) => h.close()));
});

async function host(handler: Parameters<typeof FakeHost.start>[0]): Promise<FakeHost> {
  const h = await FakeHost.start(handler);
  hosts.push(h);
  return h;
}

async function until(what: string, check: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

const isLeave = (seen: Seen): boolean => seen.body.member_epoch === -1;

function start(base: string, extra: Partial<Parameters<typeof Member.start>[0]> = {}) {
  const events: MemberEvent[] = [];
  const member = Member.start({ url: base, group: "g", topics: ["orders"], logger: silentLogger, ...extra });
  member.on("event", (event: MemberEvent) => events.push(event));
  return { member, events };
}

describe("the member", () => {
  it("acknowledges a revocation once the revoked hook resolved, and heartbeats at once", async () => {
    const h = await host((seen, res) => {
      if (isLeave(seen)) return json(res, 200, answer("m", 0));
      const owned = JSON.stringify(seen.body.owned);
      // Joined with two tasks; once both are reported owned, 1 is revoked.
      if (seen.body.member_epoch === 0) return json(res, 200, answer("m", 1, [["orders", 0, 1]]));
      if (owned === '[["orders",0,1]]') {
        return json(res, 200, answer("m", 2, [["orders", 0]], { revoking: [["orders", 1]], heartbeat_interval_ms: 5_000 }));
      }
      json(res, 200, answer("m", 2, [["orders", 0]], { heartbeat_interval_ms: 5_000 }));
    });
    let release: () => void = () => {};
    const revoked: Task[][] = [];
    const member = Member.start(
      { url: h.base, group: "g", topics: ["orders"], logger: silentLogger },
      { revoked: (tasks) => new Promise<void>((resolve) => ((release = resolve), revoked.push(tasks))) },
    );
    await until("the revoked hook runs", () => revoked.length === 1);
    assert.deepEqual(revoked[0], [task("orders", 1)]);
    assert.ok(member.mayProcess(task("orders", 1)), "a task being released may still be processed");
    const seenBefore = h.seen.length;
    await new Promise((resolve) => setTimeout(resolve, 150));
    assert.ok(
      h.seen.slice(seenBefore).every((s) => JSON.stringify(s.body.owned) === '[["orders",0,1]]'),
      "not acknowledged while the hook runs",
    );
    release();
    // At once, not at the 5 s interval.
    await until("the release is sent", () => h.seen.some((s) => JSON.stringify(s.body.owned) === '[["orders",0]]'), 1_000);
    assert.ok(!member.mayProcess(task("orders", 1)));
    assert.ok(member.mayProcess(task("orders", 0)));
    await member.leave();
    assert.equal(await member.closed, "left");
    assert.ok(isLeave(h.seen[h.seen.length - 1]));
  });

  it("tells lost and stops processing when the lease runs out while a heartbeat hangs", async () => {
    const h = await host((seen, res) => {
      // The join is answered with a 300 ms lease; nothing after it is.
      if (seen.body.member_epoch === 0) json(res, 200, answer("m", 1, [["orders", 0]], { lease_ms: 300, unreached_lease_ms: 300 }));
    });
    const { member, events } = start(h.base, { requestTimeoutMs: 2_000 });
    await until("assigned", () => events.some((e) => e.type === "assigned"));
    assert.ok(member.mayProcess(task("orders", 0)));
    const assignedAt = Date.now();
    await until("lost", () => events.some((e) => e.type === "lost"));
    assert.ok(Date.now() - assignedAt < 1_000, "lost at the lease's end, not at the request timeout");
    assert.ok(!member.mayProcess(task("orders", 0)));
    assert.equal(member.memberId, "m", "the id is kept: the host may still count the member");
    member.abort();
    assert.equal(await member.closed, "aborted");
  });

  it("drains: asks, is told draining and drained, leaves, and stops drained", async () => {
    const h = await host((seen, res) => {
      if (isLeave(seen)) return json(res, 200, answer("m", 0));
      if (!seen.body.drain) return json(res, 200, answer("m", 1));
      const drained = h.seen.filter((s) => s.body.drain).length > 1;
      json(res, 200, answer("m", 1, [], { draining: true, drained }));
    });
    const { member, events } = start(h.base);
    await until("joined", () => events.some((e) => e.type === "joined"));
    member.drain();
    assert.equal(await member.closed, "drained");
    assert.deepEqual(
      events.map((e) => e.type),
      ["joined", "draining", "drained"],
    );
    assert.ok(isLeave(h.seen[h.seen.length - 1]));
  });

  it("leaves when its AbortSignal aborts", async () => {
    const h = await host((seen, res) => json(res, 200, answer("m", isLeave(seen) ? 0 : 1)));
    const controller = new AbortController();
    const { member, events } = start(h.base, { signal: controller.signal });
    await until("joined", () => events.some((e) => e.type === "joined"));
    controller.abort();
    assert.equal(await member.closed, "left");
    assert.ok(isLeave(h.seen[h.seen.length - 1]));
  });

  it("refuses a config that cannot work", () => {
    assert.throws(() => Member.start({ url: "", group: "g", topics: ["orders"] }), /no host URL/);
    assert.throws(() => Member.start({ url: "http://h", group: "g", topics: [] }), /at least one topic/);
    assert.throws(() => Member.start({ url: "http://h", group: "g", topics: ["t"], capacity: 0 }), /capacity/);
    assert.throws(() => Member.start({ url: "http://h", group: "g", topics: ["t"], memberToken: "a b" }), /token/);
    assert.throws(() => Member.start({ url: "ftp://h", group: "g", topics: ["t"] }), /http/);
    assert.throws(() => Member.start({ url: "http://h", group: "g", topics: ["t"], endpoint: "a b" }), /endpoint/);
    assert.throws(() => Member.start({ url: "http://h", group: "g", topics: ["t"], metadata: { "": "v" } }), /metadata key/);
  });

  it("publishes its endpoint on join and again after a change, never on a leave", async () => {
    const h = await host((seen, res) => json(res, 200, answer("m", isLeave(seen) ? 0 : 1, [], { heartbeat_interval_ms: 20 })));
    const { member, events } = start(h.base, { endpoint: "http://10.0.0.5:8080", metadata: { zone: "a" } });
    await until("a heartbeat after the join", () => h.seen.length >= 2);
    assert.deepEqual([h.seen[0].body.endpoint, h.seen[0].body.metadata], ["http://10.0.0.5:8080", { zone: "a" }]);
    assert.ok(!("endpoint" in h.seen[1].body) && !("metadata" in h.seen[1].body));
    assert.ok(events.some((e) => e.type === "joined"));
    assert.throws(() => member.setEndpoint("a b"), /endpoint/);
    member.setEndpoint(null);
    await until("the change is sent", () => h.seen.some((s) => s.body.endpoint === ""));
    assert.deepEqual(h.seen.find((s) => s.body.endpoint === "")!.body.metadata, {});
    await member.leave();
    assert.ok(!("endpoint" in h.seen[h.seen.length - 1].body));
  });

  it("reports loads once the host asks, and refuses values the host would refuse", async () => {
    const h = await host((seen, res) => {
      if (isLeave(seen)) return json(res, 200, answer("m", 0));
      const report = seen.body.member_epoch === 0 ? {} : { load_report: "full" };
      json(res, 200, answer("m", 1, [["orders", 0, 2]], { heartbeat_interval_ms: 20, ...report }));
    });
    const { member } = start(h.base, { loadCapacity: 300 });
    await until("assigned", () => member.assignment.active.length === 3);
    assert.throws(() => member.reportLoad([[task("orders", 0), Number.NaN]]), /load/);
    assert.throws(() => member.reportLoad([], { utilisation: 11 }), /utilisation/);
    member.reportLoad(
      [
        [task("orders", 0), 7],
        [task("orders", 1), 7],
        [task("orders", 2), 2.5],
      ],
      { utilisation: 0.25 },
    );
    const carries = (s: Seen): boolean => Array.isArray(s.body.loads) && (s.body.loads as unknown[]).length === 2;
    await until("the loads are sent", () => h.seen.some(carries));
    const body = h.seen.find(carries)!.body;
    assert.deepEqual([body.loads, body.utilisation, body.load_capacity], [[["orders", 0, 1, 7], ["orders", 2, 2.5]], 0.25, 300]);
    await member.leave();
  });

  it("refuses a load config the host would refuse", () => {
    assert.throws(() => start("http://127.0.0.1:1", { loadCapacity: 0 }), /load capacity/);
    assert.throws(() => start("http://127.0.0.1:1", { loadThreshold: -1 }), /load threshold/);
  });
});
