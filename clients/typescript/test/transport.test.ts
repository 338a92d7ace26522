/**
 * The transport against fake hosts: answers, redirects, bootstrap URLs,
 * shards between owners, refusals, Retry-After, timeouts and lost
 * connections, each classified as the Rust transport classifies it.
 */

import assert from "node:assert/strict";
import { after, describe, it } from "node:test";

import { heartbeatUrl, parseRetryAfter, Transport } from "../src/transport";
import { HeartbeatRequest } from "../src/wire";
import { answer, FakeHost, json, refusal, refusingBase } from "./fake-host";

const request: HeartbeatRequest = {
  memberId: "c-x-1",
  memberName: null,
  memberEpoch: 0,
  topics: ["orders"],
  rack: null,
  capacity: 1,
  owned: [],
  lags: [],
  drain: false,
};

const hosts: FakeHost[] = [];
async function host(handler: Parameters<typeof FakeHost.start>[0]): Promise<FakeHost> {
  const h = await FakeHost.start(handler);
  hosts.push(h);
  return h;
}
after(async () => {
  await Promise.all(hosts.map((h) => h.close()));
});

function transport(urls: string[], requestTimeoutMs = 2_000, memberToken: string | null = null): Transport {
  return new Transport({ urls, group: "g", requestTimeoutMs, memberToken });
}

async function beat(t: Transport) {
  try {
    return await t.heartbeat(request);
  } finally {
    t.close();
  }
}

describe("the transport", () => {
  it("posts the body with the member token and reads the answer", async () => {
    const h = await host((_, res) => json(res, 200, answer("c-x-1", 1, [["orders", 0, 2]])));
    const result = await beat(transport([h.base], 2_000, "s3cret"));
    assert.ok(result.ok);
    assert.equal(result.response.active.length, 3);
    assert.equal(h.seen[0].url, "/v1/groups/g/heartbeat");
    assert.equal(h.seen[0].headers.authorization, "Bearer s3cret");
    assert.deepEqual(h.seen[0].body, {
      member_id: "c-x-1",
      member_epoch: 0,
      topics: ["orders"],
      rack: null,
      capacity: 1,
      owned: [],
      lags: [],
      drain: false,
      task_ranges: true,
    });
  });

  it("keeps one connection alive across heartbeats", async () => {
    const h = await host((_, res) => json(res, 200, answer("m", 1)));
    const t = transport([h.base]);
    for (let i = 0; i < 3; i++) assert.ok((await t.heartbeat(request)).ok);
    t.close();
    assert.equal(h.connections, 1);
  });

  it("follows a 307 to another port, keeps the token, and remembers the coordinator", async () => {
    const coordinator = await host((_, res) => json(res, 200, answer("m", 1)));
    const node = await host((seen, res) =>
      refusal(res, 307, "not_coordinator", { location: `${coordinator.base}${seen.url}` }),
    );
    const t = transport([node.base], 2_000, "tok");
    assert.ok((await t.heartbeat(request)).ok);
    assert.ok((await t.heartbeat(request)).ok);
    t.close();
    assert.equal(node.seen.length, 1, "the second heartbeat goes to the coordinator directly");
    assert.equal(coordinator.seen.length, 2);
    assert.equal(coordinator.seen[0].headers.authorization, "Bearer tok");
  });

  it("follows a relative Location", async () => {
    const h = await host((seen, res) => {
      if (seen.url.startsWith("/moved/")) json(res, 200, answer("m", 1));
      else res.writeHead(308, { location: `/moved${seen.url}` }).end();
    });
    assert.ok((await beat(transport([h.base]))).ok);
    assert.equal(h.seen[1].url, "/moved/v1/groups/g/heartbeat");
  });

  it("fails unreached when the only node refuses the connection", async () => {
    const result = await beat(transport([await refusingBase()]));
    assert.ok(!result.ok);
    assert.deepEqual(result.failure, { kind: "unreached" });
  });

  it("moves to the next bootstrap URL when one refuses the connection", async () => {
    const h = await host((_, res) => json(res, 200, answer("m", 1)));
    assert.ok((await beat(transport([await refusingBase(), h.base]))).ok);
  });

  it("fails unreached when redirected to a node that refuses the connection", async () => {
    const dead = await refusingBase();
    const node = await host((seen, res) => res.writeHead(307, { location: `${dead}${seen.url}` }).end());
    const result = await beat(transport([node.base]));
    assert.ok(!result.ok);
    assert.deepEqual(result.failure, { kind: "unreached" });
  });

  it("fails unreached on a 307 it cannot follow", async () => {
    const h = await host((_, res) => refusal(res, 307, "not_coordinator"));
    const result = await beat(transport([h.base]));
    assert.ok(!result.ok);
    assert.deepEqual(result.failure, { kind: "unreached" });
  });

  it("retries a shard between owners within the request timeout", async () => {
    const h = await host((_, res) =>
      h.seen.length <= 2 ? refusal(res, 503, "shard_unavailable") : json(res, 200, answer("m", 1)),
    );
    const result = await beat(transport([h.base]));
    assert.ok(result.ok);
    assert.equal(h.seen.length, 3);
  });

  it("fails unreached when the shard stays unavailable", async () => {
    const h = await host((_, res) => refusal(res, 503, "shard_unavailable", { "retry-after": "1" }));
    const started = Date.now();
    const result = await beat(transport([h.base], 300));
    assert.ok(!result.ok);
    assert.deepEqual(result.failure, { kind: "unreached" });
    assert.ok(Date.now() - started < 1_000);
    assert.ok(h.seen.length >= 3, `${h.seen.length} attempts`);
  });

  it("fails server when the coordinator stays unreachable (the node may have handled it)", async () => {
    const h = await host((_, res) => refusal(res, 503, "coordinator_unreachable"));
    const result = await beat(transport([h.base], 200));
    assert.ok(!result.ok);
    assert.deepEqual(result.failure, { kind: "server", status: 503, retryAfterMs: null });
  });

  it("fails refused on a 409 fenced with its error body", async () => {
    const h = await host((_, res) => refusal(res, 409, "fenced"));
    const result = await beat(transport([h.base]));
    assert.ok(!result.ok);
    assert.deepEqual(result.failure, { kind: "refused", status: 409, code: "fenced", retryAfterMs: null });
    assert.match(result.message, /fenced/);
  });

  it("reads Retry-After in seconds, at most 60", async () => {
    const limited = await host((_, res) => refusal(res, 429, "join_rate_limited", { "retry-after": "7" }));
    const capped = await host((_, res) => refusal(res, 503, "too_many_connections", { "retry-after": "600" }));
    const r1 = await beat(transport([limited.base]));
    const r2 = await beat(transport([capped.base]));
    assert.ok(!r1.ok && !r2.ok);
    assert.deepEqual(r1.failure, { kind: "refused", status: 429, code: "join_rate_limited", retryAfterMs: 7_000 });
    assert.deepEqual(r2.failure, { kind: "server", status: 503, retryAfterMs: 60_000 });
    assert.equal(parseRetryAfter("Wed, 21 Oct 2015 07:28:00 GMT"), null);
    assert.equal(parseRetryAfter(" 3 "), 3_000);
  });

  it("fails server on a 5xx without a code, unreadable on a 4xx without one or a bad answer", async () => {
    const broken = await host((_, res) => res.writeHead(502).end("bad gateway"));
    const lost = await host((_, res) => res.writeHead(404).end("not here"));
    const garbled = await host((_, res) => res.writeHead(200).end("{not json"));
    const r1 = await beat(transport([broken.base]));
    const r2 = await beat(transport([lost.base]));
    const r3 = await beat(transport([garbled.base]));
    assert.ok(!r1.ok && !r2.ok && !r3.ok);
    assert.deepEqual(r1.failure, { kind: "server", status: 502, retryAfterMs: null });
    assert.deepEqual(r2.failure, { kind: "unreadable" });
    assert.deepEqual(r3.failure, { kind: "unreadable" });
  });

  it("fails no_answer when the host does not answer in time", async () => {
    await host(() => {});
    const h = hosts[hosts.length - 1];
    const started = Date.now();
    const result = await beat(transport([h.base], 200));
    assert.ok(!result.ok);
    assert.deepEqual(result.failure, { kind: "no_answer" });
    assert.ok(Date.now() - started < 1_000);
  });

  it("fails no_answer when the connection is lost after the request went out", async () => {
    const h = await host((_seen, _res, req) => req.socket.destroy());
    const result = await beat(transport([h.base]));
    assert.ok(!result.ok);
    assert.deepEqual(result.failure, { kind: "no_answer" });
  });

  it("builds the heartbeat URL under the base path", () => {
    assert.equal(heartbeatUrl("http://h:1", "billing").toString(), "http://h:1/v1/groups/billing/heartbeat");
    assert.equal(heartbeatUrl("http://h:1/api/", "a b").toString(), "http://h:1/api/v1/groups/a%20b/heartbeat");
    assert.throws(() => heartbeatUrl("ftp://h", "g"), TypeError);
  });
});
