/**
 * A member's load reports, without I/O: the load the application set for
 * each of its active tasks, its utilisation and load capacity, what the
 * host has acknowledged of them, and so which of them the next heartbeat
 * carries. A port of the Rust client's `client/src/loads.rs`.
 *
 * Nothing is sent until an answer's `load_report` says `changes` or `full`
 * (an older host refuses unknown fields). After `full` the next heartbeat
 * carries every known load of an active task (an unknown one is left out:
 * unknown is not zero), and the utilisation and load capacity when set;
 * after `changes`, the loads that moved by more than the threshold
 * (relative to the acknowledged value) or were never acknowledged, the
 * utilisation when it moved by more than {@link UTILISATION_STEP}, and the
 * load capacity when it changed. A value counts as acknowledged once the
 * heartbeat that carried it got an answer.
 */

import { compareTasks, Task, taskKey } from "./task";

/** How far a task's load may move, relative to the acknowledged value, before it is sent again (10 %). */
export const LOAD_THRESHOLD_DEFAULT = 0.1;
/** How far the utilisation may move (absolute) before it is sent again. */
export const UTILISATION_STEP = 0.05;
/** The largest load (and load capacity) the host accepts. */
export const LOAD_MAX = 1e15;
/** The largest utilisation the host accepts (1.0 is fully used). */
export const UTILISATION_MAX = 10;

/** What an answer asks of the next heartbeat's loads. */
export type LoadReport = "none" | "changes" | "full";

/** An answer's `load_report`: absent or unknown reads as `"none"`. */
export function readLoadReport(value: unknown): LoadReport {
  return value === "changes" || value === "full" ? value : "none";
}

export function validLoad(load: number): boolean {
  return typeof load === "number" && Number.isFinite(load) && load >= 0 && load <= LOAD_MAX;
}

export function validUtilisation(utilisation: number | null): boolean {
  return (
    utilisation === null ||
    (typeof utilisation === "number" && Number.isFinite(utilisation) && utilisation >= 0 && utilisation <= UTILISATION_MAX)
  );
}

export function validLoadCapacity(capacity: number | null): boolean {
  return (
    capacity === null ||
    (typeof capacity === "number" && Number.isFinite(capacity) && capacity > 0 && capacity <= LOAD_MAX)
  );
}

/** A heartbeat's load item: `[topic, partition, load]` or `[topic, first, last, load]`. */
export type LoadItem = [string, number, number] | [string, number, number, number];

/** The load fields of one heartbeat; all null: it carries none. */
export interface LoadFields {
  readonly loads: LoadItem[] | null;
  readonly utilisation: number | null;
  readonly loadCapacity: number | null;
}

interface TaskLoad {
  readonly task: Task;
  readonly load: number;
}

interface Sent {
  readonly full: boolean;
  readonly loads: TaskLoad[];
  readonly utilisation: number | null;
  readonly loadCapacity: number | null;
}

/** Known values and acknowledged values (see the module doc). */
export class LoadBook {
  report: LoadReport = "none";
  private loads = new Map<string, TaskLoad>();
  private acked = new Map<string, number>();
  utilisation: number | null = null;
  private ackedUtilisation: number | null = null;
  loadCapacity: number | null = null;
  private ackedLoadCapacity: number | null = null;
  private inFlight: Sent | null = null;

  constructor(private readonly threshold: number = LOAD_THRESHOLD_DEFAULT) {}

  /** The application's current load of an active task (validated by the caller). */
  setLoad(task: Task, load: number): void {
    this.loads.set(taskKey(task), { task: { topic: task.topic, partition: task.partition }, load });
  }

  /** Forgets the loads (and acknowledged loads) of tasks no longer active. */
  retainActive(active: (task: Task) => boolean): void {
    for (const [key, { task }] of this.loads) if (!active(task)) this.loads.delete(key);
    // Every acknowledged load was a known one.
    for (const key of this.acked.keys()) if (!this.loads.has(key)) this.acked.delete(key);
  }

  /** The fields of the heartbeat built now, in flight until {@link answered} or {@link failed}. */
  build(): LoadFields {
    let sent: Sent | null = null;
    if (this.report === "full") {
      sent = { full: true, loads: this.sorted(() => true), utilisation: this.utilisation, loadCapacity: this.loadCapacity };
    } else if (this.report === "changes") {
      sent = this.changes();
    }
    this.inFlight = sent;
    if (sent === null) return { loads: null, utilisation: null, loadCapacity: null };
    return {
      loads: sent.full || sent.loads.length > 0 ? loadItems(sent.loads) : null,
      utilisation: sent.utilisation,
      loadCapacity: sent.loadCapacity,
    };
  }

  private sorted(keep: (tl: TaskLoad) => boolean): TaskLoad[] {
    return [...this.loads.values()].filter(keep).sort((a, b) => compareTasks(a.task, b.task));
  }

  private changes(): Sent {
    const moved = (tl: TaskLoad): boolean => {
      const acked = this.acked.get(taskKey(tl.task));
      return acked === undefined || Math.abs(tl.load - acked) > this.threshold * acked;
    };
    const u = this.utilisation;
    const utilisation =
      u !== null && (this.ackedUtilisation === null || Math.abs(u - this.ackedUtilisation) > UTILISATION_STEP) ? u : null;
    const c = this.loadCapacity;
    const loadCapacity = c !== null && c !== this.ackedLoadCapacity ? c : null;
    return { full: false, loads: this.sorted(moved), utilisation, loadCapacity };
  }

  /** The heartbeat in flight got an answer asking `report` next. */
  answered(report: LoadReport): void {
    const sent = this.inFlight;
    this.inFlight = null;
    if (sent !== null) {
      if (sent.full) {
        this.acked = new Map();
        this.ackedUtilisation = sent.utilisation;
        this.ackedLoadCapacity = sent.loadCapacity;
      }
      for (const { task, load } of sent.loads) this.acked.set(taskKey(task), load);
      if (sent.utilisation !== null) this.ackedUtilisation = sent.utilisation;
      if (sent.loadCapacity !== null) this.ackedLoadCapacity = sent.loadCapacity;
    }
    this.report = report;
    if (report !== "changes") this.forgetAcked();
  }

  /** The heartbeat in flight failed: the next carries its values again. */
  failed(): void {
    this.inFlight = null;
  }

  /** A new member (or a leave): nothing is sent until an answer asks. */
  reset(): void {
    this.inFlight = null;
    this.report = "none";
    this.forgetAcked();
  }

  private forgetAcked(): void {
    this.acked = new Map();
    this.ackedUtilisation = null;
    this.ackedLoadCapacity = null;
  }
}

/** `loads` (sorted by task) as items: each run of consecutive partitions of a topic with one load as a range. */
export function loadItems(loads: readonly TaskLoad[]): LoadItem[] {
  const items: LoadItem[] = [];
  for (const { task, load } of loads) {
    const last = items[items.length - 1];
    const end = last === undefined ? -2 : last.length === 4 ? last[2] : last[1];
    const lastLoad = last === undefined ? NaN : last.length === 4 ? last[3] : last[2];
    if (last !== undefined && last[0] === task.topic && lastLoad === load && end + 1 === task.partition) {
      items[items.length - 1] = [last[0], last[1], task.partition, load];
    } else {
      items.push([task.topic, task.partition, load]);
    }
  }
  return items;
}
