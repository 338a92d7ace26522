/**
 * The member against the real host, when ASSIGND_BIN names the `assignd`
 * binary (skipped otherwise): one member gets every task, a second joins,
 * and the tasks end split 2/2 without any task ever active on both.
 */

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { describe, it } from "node:test";

import { silentLogger } from "../src/logger";
import { Member } from "../src/member";
import { formatTask, Task } from "../src/task";
import { ADMIN_TOKEN, BIN, serve, until } from "./real-host";

const ALL: Task[] = [0, 1, 2, 3].map((partition) => ({ topic: "orders", partition }));

/** Who holds which task active, as the listeners were told; fails on a second holder. */
class Ledger {
  readonly held = new Map<string, string>();
  doubles: string[] = [];

  start(owner: string, tasks: Task[]): void {
    for (const t of tasks) {
      const other = this.held.get(formatTask(t));
      if (other !== undefined && other !== owner) this.doubles.push(`${formatTask(t)}: ${other} and ${owner}`);
      this.held.set(formatTask(t), owner);
    }
  }

  stop(owner: string, tasks: Task[]): void {
    for (const t of tasks) if (this.held.get(formatTask(t)) === owner) this.held.delete(formatTask(t));
  }

  count(owner: string): number {
    return [...this.held.values()].filter((o) => o === owner).length;
  }
}

function member(base: string, name: string, ledger: Ledger): Member {
  return Member.start(
    {
      url: base,
      group: "g",
      topics: ["orders"],
      logger: silentLogger,
      // Warm at once: a learner reports no lag.
      lags: (assignment) => assignment.learner.map((t) => ({ task: t, lag: 0 })),
    },
    {
      assigned: (tasks) => ledger.start(name, tasks),
      revoked: (tasks) => ledger.stop(name, tasks),
      lost: (tasks) => ledger.stop(name, tasks),
    },
  );
}

describe("the member against assignd", () => {
  const skip = BIN ? false : "ASSIGND_BIN is not set";
  it("gets every task alone, then shares them 2/2 with a second member, never twice", { skip }, async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "assignd-ts-"));
    const { child, base } = await serve(dataDir);
    const members: Member[] = [];
    try {
      const created = await fetch(`${base}/v1/groups/g`, {
        method: "PUT",
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify({
          topics: [{ name: "orders", partitions: 4 }],
          heartbeat_interval_ms: 100,
          expansion_timeout_ms: 1_000,
        }),
      });
      assert.equal(created.status, 201, await created.text());

      const ledger = new Ledger();
      const a = member(base, "a", ledger);
      members.push(a);
      await until("a holds all 4 tasks", () => ledger.count("a") === 4 && ALL.every((t) => a.mayProcess(t)));
      assert.ok(a.epoch > 0, "the epoch is the fencing token");

      const b = member(base, "b", ledger);
      members.push(b);
      await until("the tasks are split 2/2", () => ledger.count("a") === 2 && ledger.count("b") === 2);
      assert.deepEqual(ledger.doubles, []);
      for (const t of ALL) {
        assert.ok(a.mayProcess(t) !== b.mayProcess(t), `${formatTask(t)} may be processed by exactly one member`);
      }
      await Promise.all([a.leave(), b.leave()]);
      assert.equal(await a.closed, "left");
      assert.equal(await b.closed, "left");
    } finally {
      for (const m of members) m.abort();
      child.kill("SIGKILL");
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
