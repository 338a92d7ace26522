/**
 * The example worker's simulated stateful tasks, kept in files so that
 * every worker (in any language) shares them: a task's changelog is
 * `DIR/changelog/<topic>-<partition>` (its end offset), a worker's
 * checkpoint of it `DIR/<name or member id>/<topic>-<partition>`, both as
 * decimal text. An active task appends to its changelog and keeps its
 * checkpoint at the end; a learner or standby replays towards the end and
 * reports `end - checkpoint` as its lag.
 */

import * as fs from "node:fs";
import * as path from "node:path";

import { LagRow, Task, taskKey, TaskSet } from "../src/index";

export interface Rates {
  /** Records per second a learner or standby replays. */
  readonly replayPerS: number;
  /** Records per second an active task appends. */
  readonly processPerS: number;
}

function fileName(t: Task): string {
  return `${t.topic}-${t.partition}`;
}

function readOffset(file: string): number | null {
  try {
    const value = Number(fs.readFileSync(file, "utf8").trim());
    return Number.isSafeInteger(value) && value >= 0 ? value : null;
  } catch {
    return null;
  }
}

/** Writes through a temporary file, so a reader never sees half a number. */
function writeOffset(file: string, value: number): void {
  const tmp = `${file}.tmp-${process.pid}`;
  fs.writeFileSync(tmp, String(value));
  fs.renameSync(tmp, file);
}

export class TaskStates {
  private readonly changelogs: string;
  private checkpoints: string | null = null;
  private readonly active = new TaskSet();
  private readonly warming = new TaskSet();
  /** Fractions of records carried between ticks. */
  private readonly credit = new Map<string, number>();

  constructor(
    private readonly stateDir: string,
    private readonly changelogLen: number,
    private readonly rates: Rates,
  ) {
    this.changelogs = path.join(stateDir, "changelog");
    fs.mkdirSync(this.changelogs, { recursive: true });
  }

  /** Where this worker's checkpoints live: under its name, or its member id once joined. */
  useCheckpointDir(owner: string): void {
    if (this.checkpoints !== null) return;
    this.checkpoints = path.join(this.stateDir, owner);
    fs.mkdirSync(this.checkpoints, { recursive: true });
  }

  end(t: Task): number {
    return readOffset(path.join(this.changelogs, fileName(t))) ?? this.changelogLen;
  }

  checkpoint(t: Task): number {
    if (this.checkpoints === null) return 0;
    return readOffset(path.join(this.checkpoints, fileName(t))) ?? 0;
  }

  lag(t: Task): number {
    return Math.max(0, this.end(t) - this.checkpoint(t));
  }

  activate(tasks: Task[]): void {
    for (const t of tasks) {
      this.warming.delete(t);
      this.active.add(t);
    }
  }

  warm(tasks: Task[]): void {
    for (const t of tasks) if (!this.active.has(t)) this.warming.add(t);
  }

  /** Stops the tasks' roles; their state stays, as on disk. */
  stop(tasks: Task[], which: "active" | "warming" | "all" = "all"): void {
    for (const t of tasks) {
      if (which !== "warming") this.active.delete(t);
      if (which !== "active") this.warming.delete(t);
      this.credit.delete(taskKey(t));
    }
  }

  /** The lag rows of the learners and standbys. */
  lags(copies: Iterable<Task>): LagRow[] {
    return [...copies].map((t) => ({ task: t, lag: this.lag(t) }));
  }

  /**
   * Advances every task by `elapsedMs`: an active task that `mayProcess`
   * allows appends to its changelog and moves its checkpoint to the end; a
   * warming one replays towards the end.
   */
  tick(elapsedMs: number, mayProcess: (t: Task) => boolean): void {
    if (this.checkpoints === null) return;
    for (const t of this.active) {
      if (!mayProcess(t)) continue;
      const appended = this.take(t, (this.rates.processPerS * elapsedMs) / 1000);
      const end = this.end(t) + appended;
      if (appended > 0) writeOffset(path.join(this.changelogs, fileName(t)), end);
      if (this.checkpoint(t) !== end) writeOffset(path.join(this.checkpoints, fileName(t)), end);
    }
    for (const t of this.warming) {
      const end = this.end(t);
      const checkpoint = this.checkpoint(t);
      if (checkpoint >= end) continue;
      const reached = Math.min(end, checkpoint + this.take(t, (this.rates.replayPerS * elapsedMs) / 1000));
      writeOffset(path.join(this.checkpoints, fileName(t)), reached);
    }
  }

  private take(t: Task, budget: number): number {
    const credit = (this.credit.get(taskKey(t)) ?? 0) + budget;
    const whole = Math.floor(credit);
    this.credit.set(taskKey(t), credit - whole);
    return whole;
  }
}
