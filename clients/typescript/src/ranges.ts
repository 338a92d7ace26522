/**
 * Task lists in either of their two JSON forms. An item is a task
 * `[topic, partition]` or a range `[topic, first, last]` (both ends
 * included): a member of a million tasks sends its list in a few hundred
 * bytes rather than 17 MB. The writer writes each run of consecutive
 * partitions of a topic as one range and a lone task as a pair; the reader
 * takes either form and expands the ranges, refusing a list of more than
 * {@link TASKS_PER_LIST_MAX} tasks before expanding the range that would
 * pass it.
 */

import { Task } from "./task";

/** The most tasks one list may hold (the host's limit too). */
export const TASKS_PER_LIST_MAX = 1_000_000;

const U32_MAX = 0xffff_ffff;

/** A JSON task list item. */
export type TaskItem = [string, number] | [string, number, number];

/** A body the client cannot read. */
export class WireError extends Error {
  override name = "WireError";
}

/**
 * `tasks` as `[topic, partition]` items or, with `ranges`, runs of
 * consecutive partitions as `[topic, first, last]`. Runs are found in the
 * order given, so sorted tasks give the fewest items.
 */
export function writeTasks(tasks: readonly Task[], ranges = true): TaskItem[] {
  if (!ranges) return tasks.map((t) => [t.topic, t.partition]);
  const runs: [string, number, number][] = [];
  for (const t of tasks) {
    const last = runs[runs.length - 1];
    if (last && last[0] === t.topic && last[2] + 1 === t.partition) {
      last[2] = t.partition;
    } else {
      runs.push([t.topic, t.partition, t.partition]);
    }
  }
  return runs.map(([topic, first, last]) => (first === last ? [topic, first] : [topic, first, last]));
}

function partition(value: unknown, where: string): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0 || value > U32_MAX) {
    throw new WireError(`${where}: a partition must be an integer from 0 to ${U32_MAX}, not ${JSON.stringify(value)}`);
  }
  return value;
}

/** A run of consecutive partitions of one topic, both ends included. */
export type TaskRun = readonly [topic: string, first: number, last: number];

/** Reads a task list in either form as runs, without expanding them; `null` and absence read as empty. */
export function readRuns(value: unknown, field = "tasks"): TaskRun[] {
  if (value === null || value === undefined) return [];
  if (!Array.isArray(value)) throw new WireError(`${field}: not a list`);
  return value.map((item: unknown): TaskRun => {
    if (!Array.isArray(item) || item.length < 2 || item.length > 3 || typeof item[0] !== "string") {
      throw new WireError(`${field}: ${JSON.stringify(item)} is not [topic, partition] or [topic, first, last]`);
    }
    const first = partition(item[1], field);
    const last = item.length === 3 ? partition(item[2], field) : first;
    if (first > last) {
      throw new WireError(`${field}: the range ${JSON.stringify(item)} ends before it starts`);
    }
    return [item[0], first, last];
  });
}

/** Reads a task list in either form; `null` and absence read as empty. */
export function readTasks(value: unknown, field = "tasks"): Task[] {
  const tasks: Task[] = [];
  for (const [topic, first, last] of readRuns(value, field)) {
    if (tasks.length + (last - first) + 1 > TASKS_PER_LIST_MAX) {
      throw new WireError(`${field}: more than ${TASKS_PER_LIST_MAX} tasks in one list`);
    }
    for (let p = first; p <= last; p++) tasks.push({ topic, partition: p });
  }
  return tasks;
}
