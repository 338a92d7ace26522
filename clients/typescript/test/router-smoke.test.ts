/**
 * The router against the real host, when ASSIGND_BIN names the `assignd`
 * binary (skipped otherwise): a group with a reader token, a member
 * publishing its endpoint, a router reading the owner of a key; a second
 * member joins, the router is told, and once the group is stable every
 * partition's owner is one of the two endpoints. The admin token reads
 * routes too; a wrong token is refused 403.
 */

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, it } from "node:test";

import { silentLogger } from "../src/logger";
import { Member } from "../src/member";
import { Router, RoutesRefusedError } from "../src/router";
import { RouteTable } from "../src/routes";
import { ADMIN_TOKEN, BIN, serve, until } from "./real-host";

const READER_TOKEN = "reader-reader-reader-1";
const ENDPOINTS = { a: "http://10.0.0.1:8080", b: "http://10.0.0.2:8080" };

function member(base: string, name: "a" | "b"): Member {
  return Member.start({
    url: base,
    group: "g",
    topics: ["orders"],
    memberName: name,
    endpoint: ENDPOINTS[name],
    metadata: { zone: name },
    logger: silentLogger,
  });
}

function router(base: string, token: string): Router {
  return Router.start({ url: base, group: "g", token, waitMs: 2_000, logger: silentLogger });
}

describe("the router against assignd", () => {
  const skip = BIN ? false : "ASSIGND_BIN is not set";
  it("resolves keys to the members' endpoints and follows a second member's join", { skip }, async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "assignd-ts-router-"));
    const { child, base } = await serve(dataDir);
    const closers: (() => unknown)[] = [];
    try {
      const created = await fetch(`${base}/v1/groups/g`, {
        method: "PUT",
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify({
          topics: [{ name: "orders", partitions: 4 }],
          heartbeat_interval_ms: 100,
          expansion_timeout_ms: 1_000,
          learners: "off",
          reader_token: READER_TOKEN,
        }),
      });
      assert.equal(created.status, 201, await created.text());

      const a = member(base, "a");
      closers.push(() => a.abort());
      const r = router(base, READER_TOKEN);
      closers.push(() => r.close());
      const changes: RouteTable[] = [];
      r.on("change", (table: RouteTable) => changes.push(table));
      await r.ready(10_000);
      await until("a owns the key", () => r.ownerOf("orders", "customer-42").owner?.endpoint === ENDPOINTS.a);
      const owner = r.ownerOf("orders", "customer-42").owner!;
      assert.deepEqual([owner.memberName, owner.metadata], ["a", { zone: "a" }]);

      const seen = changes.length;
      const b = member(base, "b");
      closers.push(() => b.abort());
      await until("the router is told of b", () => changes.length > seen);
      const endpoints = (): (string | null | undefined)[] =>
        [0, 1, 2, 3].map((p) => r.ownerOfPartition("orders", p).owner?.endpoint);
      await until("both members own tasks", () => {
        const owners = endpoints();
        return owners.every((e) => e === ENDPOINTS.a || e === ENDPOINTS.b) && new Set(owners).size === 2;
      });

      const admin = router(base, ADMIN_TOKEN);
      closers.push(() => admin.close());
      assert.ok((await admin.ready(10_000)).epoch >= 1);
      const wrong = router(base, "not-the-reader-token");
      closers.push(() => wrong.close());
      await assert.rejects(wrong.ready(10_000), (error: unknown) => error instanceof RoutesRefusedError && error.status === 403);

      // A quiet watch runs out after half the host's default promise, and its answer says how long it waited: the bound
      // counts from there.
      await until("a watch says how long it waited", () => (r.table?.waitedMs ?? 0) > 0);
      const renewed = r.table!;
      assert.equal(renewed.validMs, 2000);
      assert.equal(Math.round(renewed.freshUntilMs - renewed.sentAtMs), renewed.waitedMs + 2000);
      await Promise.all([a.leave(), b.leave()]);
    } finally {
      for (const close of closers.reverse()) await close();
      child.kill("SIGKILL");
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
