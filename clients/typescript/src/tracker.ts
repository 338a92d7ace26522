/**
 * What the application has been told, and what it must be told next: the
 * member's side of incremental cooperative rebalancing, without I/O. It
 * owns three rules:
 * - a task the host moves to `revoking` is reported owned until the
 *   application acknowledges releasing it, and never after;
 * - a task the host gives (back) while the application is still releasing
 *   it is granted only after that release is acknowledged;
 * - the `owned` report never names a task the host's last answer does not
 *   hold for this member (the host refuses such a report).
 */

import { Task, TaskSet, taskKey } from "./task";
import { HeartbeatResponse } from "./wire";

/** A member's assignment as the application has been told it; lists sorted. */
export interface Assignment {
  /** Tasks the application may process. */
  readonly active: Task[];
  /** Tasks asked to be released and not acknowledged yet (still owned). */
  readonly revoking: Task[];
  /** Tasks to warm up and report lag on. */
  readonly learner: Task[];
  /** Hot copies to keep. */
  readonly standby: Task[];
  readonly draining: boolean;
}

/** One thing the application must learn, in the order it must learn it. */
export type Change =
  | { readonly type: "lost"; readonly tasks: Task[] }
  | { readonly type: "revoked"; readonly ack: number; readonly tasks: Task[] }
  | { readonly type: "learner_stopped"; readonly tasks: Task[] }
  | { readonly type: "standby_stopped"; readonly tasks: Task[] }
  | { readonly type: "promoted"; readonly tasks: Task[] }
  | { readonly type: "assigned"; readonly tasks: Task[] }
  | { readonly type: "learner_started"; readonly tasks: Task[] }
  | { readonly type: "standby_started"; readonly tasks: Task[] }
  | { readonly type: "draining" }
  | { readonly type: "drained" };

/**
 * How many answers a copy the host stopped listing is kept while the
 * member's epoch stays put.
 */
const AWAIT_ANSWERS_MAX = 10;

/**
 * Warm copies of one kind (learners or standbys) as the application was
 * told them. A caught-up learner is granted only once its old owner
 * released it, and meanwhile the answers list it nowhere; so a copy the
 * answers stop listing is kept (still warming, its lag still reported)
 * until it is granted (promoted), or an answer at a higher epoch leaves it
 * out, or {@link AWAIT_ANSWERS_MAX} answers went by (stopped).
 */
class Copies {
  told = new TaskSet();
  /** Told copies no longer listed: the epoch that dropped each and the answers it may still wait. */
  private awaiting = new Map<string, { task: Task; droppedAt: number; left: number }>();

  /** Applies an answer's list at `epoch`; `granted` tasks leave without a stop. */
  update(listed: TaskSet, granted: TaskSet, epoch: number): { started: Task[]; stopped: Task[] } {
    const started = listed.toArray().filter((t) => !this.told.has(t));
    const dropped = this.told.toArray().filter((t) => !listed.has(t) && !granted.has(t));
    const stopped: Task[] = [];
    for (const t of dropped) {
      const wait = this.awaiting.get(taskKey(t));
      if (wait === undefined) {
        this.awaiting.set(taskKey(t), { task: t, droppedAt: epoch, left: AWAIT_ANSWERS_MAX });
        continue;
      }
      wait.left = Math.max(0, wait.left - 1);
      if (epoch > wait.droppedAt || wait.left === 0) {
        this.awaiting.delete(taskKey(t));
        stopped.push(t);
      }
    }
    for (const [key, wait] of this.awaiting) {
      if (listed.has(wait.task) || granted.has(wait.task)) this.awaiting.delete(key);
    }
    this.told = new TaskSet([...listed, ...[...this.awaiting.values()].map((w) => w.task)]);
    return { started, stopped };
  }

  /** `granted` tasks became active: copies no more. */
  promote(granted: TaskSet): void {
    this.told = this.told.filter((t) => !granted.has(t));
    for (const [key, wait] of this.awaiting) {
      if (granted.has(wait.task)) this.awaiting.delete(key);
    }
  }
}

export class Tracker {
  private active = new TaskSet();
  /** Tasks being released, by the ack id that releases them. */
  private revoking = new Map<string, { task: Task; ack: number }>();
  private learner = new Copies();
  private standby = new Copies();
  private draining = false;
  /** What the host's last answer holds for this member (active and revoking). */
  private hostHeld = new TaskSet();
  private hostActive = new TaskSet();
  /** Ack ids are never reused, so one from before a reset matches nothing. */
  private nextAck = 0;

  assignment(): Assignment {
    return {
      active: this.active.toArray(),
      revoking: this.revokingTasks().toArray(),
      learner: this.learner.told.toArray(),
      standby: this.standby.told.toArray(),
      draining: this.draining,
    };
  }

  /** The `owned` report: held tasks the host still counts as this member's. */
  owned(): Task[] {
    return new TaskSet([...this.active, ...this.revokingTasks()]).toArray().filter((t) => this.hostHeld.has(t));
  }

  /** Whether any task is active or being released here. */
  holdsAny(): boolean {
    return this.active.size > 0 || this.revoking.size > 0;
  }

  /** Whether any task is revoked and not yet acknowledged. */
  isReleasing(): boolean {
    return this.revoking.size > 0;
  }

  /** Whether `task` is active here (not being released). */
  isActive(task: Task): boolean {
    return this.active.has(task);
  }

  /** Whether `task` is active or being released here. */
  holds(t: Task): boolean {
    return this.active.has(t) || this.revoking.has(taskKey(t));
  }

  /** Applies a heartbeat answer. */
  onResponse(response: HeartbeatResponse): Change[] {
    const changes: Change[] = [];
    const revokingNow = new TaskSet(response.revoking);
    this.hostActive = new TaskSet(response.active);
    this.hostHeld = new TaskSet([...response.active, ...response.revoking]);

    const lost = this.active.filter((t) => !this.hostHeld.has(t));
    if (lost.size > 0) {
      this.active = this.active.filter((t) => !lost.has(t));
      changes.push({ type: "lost", tasks: lost.toArray() });
    }
    const revoked = this.active.filter((t) => revokingNow.has(t));
    if (revoked.size > 0) {
      const ack = this.nextAck++;
      this.active = this.active.filter((t) => !revoked.has(t));
      for (const t of revoked) this.revoking.set(taskKey(t), { task: t, ack });
      changes.push({ type: "revoked", ack, tasks: revoked.toArray() });
    }

    const granted = this.grantable();
    const { promoted, assigned } = this.splitWarm(granted);
    const epoch = response.memberEpoch;
    const learner = this.learner.update(new TaskSet(response.learner), granted, epoch);
    const standby = this.standby.update(new TaskSet(response.standby), granted, epoch);
    for (const t of granted) this.active.add(t);

    const lists: [Change["type"], Task[]][] = [
      ["learner_stopped", learner.stopped],
      ["standby_stopped", standby.stopped],
      ["promoted", promoted],
      ["assigned", assigned],
      ["learner_started", learner.started],
      ["standby_started", standby.started],
    ];
    for (const [type, tasks] of lists) {
      if (tasks.length > 0) changes.push({ type, tasks } as Change);
    }
    if (response.draining && !this.draining) changes.push({ type: "draining" });
    this.draining = response.draining;
    if (response.drained) changes.push({ type: "drained" });
    return changes;
  }

  /**
   * The application released the tasks of `ack`. Returns whether the ack
   * was known, and the tasks the host gave back meanwhile that it unblocks.
   */
  onAck(ack: number): { known: boolean; changes: Change[] } {
    const before = this.revoking.size;
    for (const [key, entry] of this.revoking) {
      if (entry.ack === ack) this.revoking.delete(key);
    }
    if (this.revoking.size === before) return { known: false, changes: [] };
    const granted = this.grantable();
    const { promoted, assigned } = this.splitWarm(granted);
    for (const t of granted) this.active.add(t);
    const changes: Change[] = [];
    if (promoted.length > 0) changes.push({ type: "promoted", tasks: promoted });
    if (assigned.length > 0) changes.push({ type: "assigned", tasks: assigned });
    return { known: true, changes };
  }

  /**
   * Forgets everything (fenced, removed, lease ran out, rejoining as a new
   * member); returns every task the application held.
   */
  reset(): Task[] {
    const held = new TaskSet([...this.active, ...this.revokingTasks()]).toArray();
    this.active = new TaskSet();
    this.revoking.clear();
    this.learner = new Copies();
    this.standby = new Copies();
    this.draining = false;
    this.hostHeld = new TaskSet();
    this.hostActive = new TaskSet();
    return held;
  }

  private revokingTasks(): TaskSet {
    return new TaskSet([...this.revoking.values()].map((entry) => entry.task));
  }

  /** Tasks the host gives as active that are neither held nor still being released. */
  private grantable(): TaskSet {
    return this.hostActive.filter((t) => !this.active.has(t) && !this.revoking.has(taskKey(t)));
  }

  /** Splits granted tasks into promoted copies and cold assignments, and forgets the copies. */
  private splitWarm(granted: TaskSet): { promoted: Task[]; assigned: Task[] } {
    const promoted: Task[] = [];
    const assigned: Task[] = [];
    for (const t of granted) {
      (this.learner.told.has(t) || this.standby.told.has(t) ? promoted : assigned).push(t);
    }
    this.learner.promote(granted);
    this.standby.promote(granted);
    return { promoted, assigned };
  }
}
