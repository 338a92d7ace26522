/**
 * A task (one partition of one topic), its order, and a set of tasks.
 *
 * Task lists go to the application sorted as the Rust client sorts them:
 * by topic in byte order (UTF-8, which is code point order, not the
 * UTF-16 order of JavaScript's `<`), then by partition.
 */

/** One partition of one topic. On the wire it is `[topic, partition]`. */
export interface Task {
  readonly topic: string;
  readonly partition: number;
}

export function task(topic: string, partition: number): Task {
  return { topic, partition };
}

/** `topic/partition`, for logs and messages. */
export function formatTask(t: Task): string {
  return `${t.topic}/${t.partition}`;
}

/** Compares two topics in UTF-8 byte order (code point order). */
export function compareTopics(a: string, b: string): number {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    // Surrogates (U+D800..U+DFFF) encode code points above U+FFFF, which
    // sort after every BMP character, U+E000..U+FFFF included.
    const xs = x >= 0xd800 && x <= 0xdfff;
    const ys = y >= 0xd800 && y <= 0xdfff;
    if (xs !== ys) return xs ? 1 : -1;
    return x - y;
  }
  return a.length - b.length;
}

export function compareTasks(a: Task, b: Task): number {
  return compareTopics(a.topic, b.topic) || a.partition - b.partition;
}

/** A string that names a task exactly, for maps and sets. */
export function taskKey(t: Task): string {
  return `${t.partition}:${t.topic}`;
}

/** A set of tasks by value; iteration is in task order. */
export class TaskSet implements Iterable<Task> {
  private readonly byKey = new Map<string, Task>();

  constructor(tasks: Iterable<Task> = []) {
    for (const t of tasks) this.add(t);
  }

  get size(): number {
    return this.byKey.size;
  }

  has(t: Task): boolean {
    return this.byKey.has(taskKey(t));
  }

  add(t: Task): this {
    this.byKey.set(taskKey(t), { topic: t.topic, partition: t.partition });
    return this;
  }

  delete(t: Task): boolean {
    return this.byKey.delete(taskKey(t));
  }

  /** The tasks in order, as a new array. */
  toArray(): Task[] {
    return [...this.byKey.values()].sort(compareTasks);
  }

  [Symbol.iterator](): Iterator<Task> {
    return this.toArray()[Symbol.iterator]();
  }

  filter(keep: (t: Task) => boolean): TaskSet {
    return new TaskSet(this.toArray().filter(keep));
  }
}
