/**
 * Keys to partitions and the routing table against the shared vectors
 * (clients/conformance/routes), then the router's loop against a fake
 * host: the blocking query, a change, Retry-After, failover, redirects,
 * refusals, misroutes and close.
 */

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as http from "node:http";
import * as path from "node:path";
import { after, describe, it } from "node:test";

import { murmur2, partitionForKey } from "../src/keys";
import { silentLogger } from "../src/logger";
import { WireError } from "../src/ranges";
import { Router, RouterNotReadyError, RoutesRefusedError } from "../src/router";
import { RouteError, RouteMember, RouteTable } from "../src/routes";
import { FakeHost, json, refusal, refusingBase } from "./fake-host";

/** From dist/test/ up to clients/. */
const ROUTES_DIR = path.resolve(__dirname, "../../../conformance/routes");
const TOKEN = "reader-token-1";

function vectors(name: string): any {
  return JSON.parse(fs.readFileSync(path.join(ROUTES_DIR, name), "utf8"));
}

describe("keys to partitions", () => {
  it("match Kafka's murmur2 and partitioner on every vector", () => {
    const cases = vectors("murmur2.json").cases;
    assert.ok(cases.length > 10);
    for (const c of cases) {
      const key = Buffer.from(c.key_hex, "hex");
      assert.equal(murmur2(key), c.murmur2, JSON.stringify(c));
      if (c.key !== null) assert.equal(murmur2(c.key), c.murmur2);
      for (const [partitions, partition] of Object.entries(c.partitions)) {
        assert.equal(partitionForKey(key, Number(partitions)), partition, JSON.stringify(c));
      }
    }
  });
});

const ids = (members: readonly RouteMember[]): string[] => members.map((m) => m.memberId);

describe("the routing table", () => {
  const vector = vectors("table.json");

  it("answers every lookup of the vector", () => {
    const table = new RouteTable(vector.table, 0);
    for (const lookup of vector.lookups) {
      const route =
        lookup.key !== undefined ? table.routeForKey(lookup.topic, lookup.key, 0) : table.route(lookup.topic, lookup.partition, 0);
      const got = {
        partition: route.partition,
        owner: route.owner?.memberId ?? null,
        moving_to: route.movingTo?.memberId ?? null,
        learners: ids(route.learners),
        standbys: ids(route.standbys),
      };
      const { partition, owner, moving_to, learners, standbys } = lookup;
      assert.deepEqual(got, { partition, owner, moving_to, learners, standbys }, JSON.stringify(lookup));
      assert.equal(route.epoch, vector.table.epoch);
    }
  });

  it("gives an owner's name, endpoint and metadata", () => {
    const owner = new RouteTable(vector.table, 0).route("orders", 0, 0).owner!;
    assert.deepEqual(owner, { memberId: "m-1", memberName: "worker-a", endpoint: "http://10.0.0.5:8080", metadata: { zone: "a" } });
  });

  it("is fresh until its bound, counted from the send time", () => {
    for (const c of vector.freshness) {
      const table = new RouteTable(vector.table, c.sent_at_ms);
      assert.equal(table.isFresh(c.now_ms), c.fresh, JSON.stringify(c));
      assert.equal(table.route("orders", 0, c.now_ms).fresh, c.fresh);
    }
  });

  it("counts its bound from the send time plus the host's wait", () => {
    const held = new RouteTable(table(1, "m-1", "http://a:1", 2000), 10_000, 1500);
    assert.equal(held.freshUntilMs - held.sentAtMs, 3500);
    assert.ok(held.isFresh(13_499) && !held.isFresh(13_500));
    assert.ok(held.route("orders", 0, 13_499).fresh);
    const again = held.resent(10_100, 0);
    assert.deepEqual([again.freshUntilMs, again.waitedMs], [12_100, 0]);
  });

  it("refuses an unknown topic and a partition out of range", () => {
    const table = new RouteTable(vector.table, 0);
    const code = (f: () => unknown): string => {
      try {
        f();
      } catch (error) {
        assert.ok(error instanceof RouteError);
        return error.code;
      }
      return "no error";
    };
    assert.equal(code(() => table.routeForKey(vector.unknown_topic, "k", 0)), "unknown_topic");
    assert.equal(code(() => table.route(vector.unknown_topic, 0, 0)), "unknown_topic");
    const [topic, partition] = vector.partition_out_of_range;
    assert.equal(code(() => table.route(topic, partition, 0)), "partition_out_of_range");
  });

  it("refuses a body that is not a table", () => {
    assert.throws(() => new RouteTable({ group: "g", epoch: -1 }, 0), WireError);
    assert.throws(() => new RouteTable({ ...table(1), active: { "m-1": [["orders", 3, 1]] } }, 0), WireError);
  });
});

/** A table of one topic `orders` of 4 partitions, all owned by `owner`. */
/** It promises 60 s by default: a router's query then waits the `waitMs` it was given (under half the promise). */
function table(epoch: number, owner = "m-1", endpoint: string | null = "http://a:1", validMs = 60_000): Record<string, unknown> {
  return {
    group: "g",
    epoch,
    group_epoch: epoch,
    valid_ms: validMs,
    topics: { orders: 4 },
    members: { [owner]: { member_name: null, endpoint, metadata: {} } },
    active: { [owner]: [["orders", 0, 3]] },
    learner: {},
    standby: {},
    moving: [],
    unowned: [],
  };
}

interface Query {
  readonly at: number;
  readonly afterEpoch: number | null;
  readonly waitMs: number | null;
  readonly headers: http.IncomingHttpHeaders;
}

type Scripted = (response: http.ServerResponse) => void;

/** A routes host that answers as the real one does (a blocking query waits for a newer epoch or `wait_ms`), unless a reply is scripted. */
class RoutesHost {
  readonly queries: Query[] = [];
  readonly script: Scripted[] = [];
  /** The `Assignd-Routes-Waited-Ms` every table answer carries, if any. */
  waitedMs: number | null = null;
  private waiting: (() => void)[] = [];
  private seenWaiters: (() => void)[] = [];
  host!: FakeHost;

  constructor(public current: Record<string, unknown>) {}

  static async start(first = table(1)): Promise<RoutesHost> {
    const routes = new RoutesHost(first);
    routes.host = await FakeHost.start((seen, response) => routes.answer(seen.url, seen.headers, response));
    return routes;
  }

  get base(): string {
    return this.host.base;
  }

  private answer(url: string, headers: http.IncomingHttpHeaders, response: http.ServerResponse): void {
    const query = new URL(url, "http://x").searchParams;
    const num = (name: string): number | null => (query.has(name) ? Number(query.get(name)) : null);
    const seen = { at: performance.now(), afterEpoch: num("after_epoch"), waitMs: num("wait_ms"), headers };
    this.queries.push(seen);
    for (const wake of this.seenWaiters.splice(0)) wake();
    const scripted = this.script.shift();
    if (scripted) return scripted(response);
    if (this.waitedMs !== null) response.setHeader("assignd-routes-waited-ms", String(this.waitedMs));
    if (seen.afterEpoch === null || this.current.epoch !== seen.afterEpoch) return json(response, 200, this.current);
    const reply = (): void => {
      clearTimeout(timer);
      this.waiting = this.waiting.filter((w) => w !== reply);
      if (!response.writableEnded) json(response, 200, this.current);
    };
    const timer = setTimeout(reply, seen.waitMs ?? 0);
    this.waiting.push(reply);
  }

  publish(next: Record<string, unknown>): void {
    this.current = next;
    for (const reply of [...this.waiting]) reply();
  }

  async queriesAtLeast(count: number): Promise<Query[]> {
    while (this.queries.length < count) {
      await new Promise<void>((resolve) => this.seenWaiters.push(resolve));
    }
    return this.queries;
  }

  close(): Promise<void> {
    for (const reply of [...this.waiting]) reply();
    return this.host.close();
  }
}

describe("the router", () => {
  const cleanups: (() => unknown)[] = [];
  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });
  const host = async (first?: Record<string, unknown>): Promise<RoutesHost> => {
    const started = await RoutesHost.start(first);
    cleanups.push(() => started.close());
    return started;
  };
  const router = (url: string | string[], waitMs = 5000, token: string | null = TOKEN): Router => {
    const started = Router.start({ url, group: "g", token, waitMs, logger: silentLogger });
    cleanups.push(() => started.close());
    return started;
  };
  const nextChange = (r: Router): Promise<RouteTable> => new Promise((resolve) => r.once("change", resolve));

  it("gets ready, then is told of a change by its blocking query", async () => {
    const routes = await host();
    const r = router(routes.base);
    const first = nextChange(r);
    assert.equal((await r.ready(5000)).epoch, 1);
    assert.equal((await first).epoch, 1);
    assert.equal(r.ownerOf("orders", "k").owner?.endpoint, "http://a:1");
    const [q1, q2] = await routes.queriesAtLeast(2);
    assert.equal(q1.afterEpoch, null);
    assert.equal(q1.headers.authorization, `Bearer ${TOKEN}`);
    assert.deepEqual([q2.afterEpoch, q2.waitMs], [1, 5000]);
    const change = nextChange(r);
    routes.publish(table(2, "m-2", "http://b:2"));
    assert.equal((await change).epoch, 2);
    assert.equal(r.epoch, 2);
    assert.equal(r.ownerOfPartition("orders", 3).owner?.memberId, "m-2");
    assert.equal((await routes.queriesAtLeast(3))[2].afterEpoch, 2);
    r.close();
  });

  it("renews an unchanged table without telling of a change", async () => {
    const routes = await host(table(1, "m-1", "http://a:1", 60_000));
    const r = router(routes.base, 50);
    let changes = 0;
    r.on("change", () => changes++);
    await r.ready(5000);
    await routes.queriesAtLeast(4);
    assert.equal(changes, 1, "only the first table is a change");
    assert.ok(r.fresh && r.ageMs! < 60_000);
    r.close();
  });

  it("waits out a 503 as Retry-After says", async () => {
    const routes = await host();
    routes.script.push((response) => refusal(response, 503, "too_many_watchers", { "retry-after": "1" }));
    const r = router(routes.base);
    assert.equal((await r.ready(10_000)).epoch, 1);
    const [first, second] = await routes.queriesAtLeast(2);
    assert.ok(second.at - first.at >= 900, `${second.at - first.at} ms`);
    r.close();
  });

  it("passes over a node that does not answer", async () => {
    const routes = await host();
    const r = router([await refusingBase(), routes.base]);
    assert.equal((await r.ready(10_000)).epoch, 1);
    r.close();
  });

  it("follows a redirect with the token", async () => {
    const coordinator = await host();
    const node = await host();
    node.script.push((response) => {
      response.writeHead(307, { location: `${coordinator.base}/v1/groups/g/routes` });
      response.end();
    });
    const r = router(node.base);
    assert.equal((await r.ready(5000)).epoch, 1);
    assert.equal((await coordinator.queriesAtLeast(1))[0].headers.authorization, `Bearer ${TOKEN}`);
    r.close();
  });

  it("fails ready with the host's refusal", async () => {
    const routes = await host();
    routes.script.push((response) => json(response, 403, { error: { code: "forbidden", message: "not a reader token" } }));
    const r = router(routes.base);
    await assert.rejects(r.ready(5000), (error: unknown) => {
      assert.ok(error instanceof RoutesRefusedError);
      assert.deepEqual([error.status, error.code], [403, "forbidden"]);
      assert.match(error.message, /not a reader token/);
      return true;
    });
    r.close();
  });

  it("refuses a config that cannot work at once", () => {
    for (const config of [
      { url: "", group: "g" },
      { url: "ftp://h", group: "g" },
      { url: "http://h", group: "" },
      { url: "http://h", group: "g", waitMs: 20_001 },
      { url: "http://h", group: "g", token: "a b" },
    ]) {
      assert.throws(() => Router.start(config), TypeError, JSON.stringify(config));
    }
  });

  it("times out ready with the last failure, and refuses lookups before a table", async () => {
    const r = router(await refusingBase());
    await assert.rejects(r.ready(300), (error: unknown) => error instanceof RouterNotReadyError && /last failure/.test(error.message));
    assert.throws(() => r.ownerOf("orders", "k"), (error: unknown) => error instanceof RouteError && error.code === "no_table");
    r.close();
  });

  it("takes a lower epoch only when it asked after a higher one", async () => {
    const routes = await host(table(5));
    const r = router(routes.base);
    await r.ready(5000);
    await routes.queriesAtLeast(2);
    const change = nextChange(r);
    routes.publish(table(3)); // a new coordinator whose table the router never saw
    assert.equal((await change).epoch, 3);
    r.close();
  });

  it("counts a misroute and asks for a newer table at once", async () => {
    const routes = await host();
    const r = router(routes.base);
    await r.ready(5000);
    const route = r.ownerOf("orders", "k");
    await routes.queriesAtLeast(2);
    r.misrouted(route);
    assert.equal((await routes.queriesAtLeast(3))[2].afterEpoch, null);
    assert.equal(r.misroutes, 1);
    const change = nextChange(r);
    routes.publish(table(2));
    await change;
    r.misrouted(route); // from an older table: counted, nothing asked
    assert.equal(r.misroutes, 2);
    r.close();
  });

  it("counts a table's bound from the send time plus the wait the host reports", async () => {
    const routes = await host(table(1, "m-1", "http://a:1", 2000));
    routes.waitedMs = 1500; // answered at once, but read 1.5 s after it came, says the host
    const r = router(routes.base, 20_000);
    const held = await r.ready(5000);
    assert.equal(held.waitedMs, 1500);
    // Rounded: `performance.now()` times are fractional doubles.
    assert.equal(Math.round(held.freshUntilMs - held.sentAtMs), 3500);
    assert.ok(r.fresh);
    r.close();
  });

  it("counts from the send time when the answer does not say how long it waited", async () => {
    const routes = await host(table(1, "m-1", "http://a:1", 2000));
    const held = await router(routes.base).ready(5000);
    assert.deepEqual([held.waitedMs, Math.round(held.freshUntilMs - held.sentAtMs)], [0, 2000]);
  });

  it("waits at most half the bound of a table that promises one, else the configured wait", async () => {
    const routes = await host(table(1, "m-1", "http://a:1", 2000));
    const r = router(routes.base, 20_000);
    await r.ready(5000);
    const [, second] = await routes.queriesAtLeast(2);
    assert.deepEqual([second.afterEpoch, second.waitMs], [1, 1000]);
    const change = nextChange(r);
    routes.publish(table(2, "m-1", "http://a:1", 0)); // no promise
    await change;
    while (!routes.queries.some((q) => q.afterEpoch === 2)) await routes.queriesAtLeast(routes.queries.length + 1);
    assert.equal(routes.queries.find((q) => q.afterEpoch === 2)!.waitMs, 20_000);
    r.close();
  });

  it("keeps a configured wait under half the bound", async () => {
    const routes = await host(table(1, "m-1", "http://a:1", 2000));
    const r = router(routes.base, 300);
    await r.ready(5000);
    assert.equal((await routes.queriesAtLeast(2))[1].waitMs, 300);
    r.close();
  });

  it("ends a blocking query at once when closed", async () => {
    const routes = await host();
    const r = router(routes.base, 20_000);
    await r.ready(5000);
    await routes.queriesAtLeast(2);
    r.close();
    await r.done;
    const never = router(await refusingBase());
    never.close();
    await assert.rejects(never.ready(), (error: unknown) => error instanceof RouterNotReadyError && /closed/.test(error.message));
  });
});
