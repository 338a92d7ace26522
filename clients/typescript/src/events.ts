/**
 * The events a member hands the application, and the listener that takes
 * them. Events are delivered one at a time, in order; a hook may return a
 * promise, and the next event waits for it.
 */

import { HeartbeatError } from "./failure";
import { Task } from "./task";

/** An event as the application sees it (also emitted as `"event"` on the member). */
export type MemberEvent =
  | { readonly type: "joined"; readonly memberId: string }
  | {
      readonly type:
        | "assigned"
        | "promoted"
        | "revoked"
        | "lost"
        | "learner_started"
        | "learner_stopped"
        | "standby_started"
        | "standby_stopped";
      readonly tasks: Task[];
    }
  | { readonly type: "draining" }
  | { readonly type: "drained" }
  | { readonly type: "fenced"; readonly rejoining: boolean }
  | { readonly type: "replaced"; readonly memberName: string }
  | { readonly type: "error"; readonly error: HeartbeatError };

type Hook<A extends unknown[]> = (...args: A) => void | Promise<void>;

/**
 * What the application does on each event; every hook is optional.
 *
 * The three that matter for correctness:
 * - `assigned`: start processing. It gets newly active tasks, cold ones and
 *   promoted ones (learner or standby copies that became active, their
 *   state warm; then `promoted` is true).
 * - `revoked`: stop processing these. The member acknowledges the
 *   revocation once the hook returns (or its promise resolves); until then
 *   the tasks stay this member's and nobody else gets them. If it throws,
 *   nothing is acknowledged and the host fences the member at the group's
 *   expansion timeout.
 * - `lost`: stop at once, no acknowledgement: they may be active elsewhere
 *   already (fenced, removed, the lease ran out, or a leave is being sent).
 */
export interface MemberListener {
  joined?: Hook<[memberId: string]>;
  assigned?: Hook<[tasks: Task[], info: { promoted: boolean }]>;
  revoked?: Hook<[tasks: Task[]]>;
  lost?: Hook<[tasks: Task[]]>;
  learnerStarted?: Hook<[tasks: Task[]]>;
  learnerStopped?: Hook<[tasks: Task[]]>;
  standbyStarted?: Hook<[tasks: Task[]]>;
  standbyStopped?: Hook<[tasks: Task[]]>;
  /** The member is draining: its tasks will be revoked as their new owners warm up. */
  draining?: Hook<[]>;
  /** The drain finished: the member holds nothing and leaves. */
  drained?: Hook<[]>;
  /** The host removed the member; `rejoining` unless it was leaving or draining. */
  fenced?: Hook<[rejoining: boolean]>;
  /** Another process joined with this member's name: the member stops. */
  replaced?: Hook<[memberName: string]>;
  /** A failed heartbeat; the member retries as the failure calls for. */
  error?: Hook<[error: HeartbeatError]>;
}

/** Calls the hook of `listener` for `event`. */
export function dispatch(listener: MemberListener, event: MemberEvent): void | Promise<void> {
  switch (event.type) {
    case "joined":
      return listener.joined?.(event.memberId);
    case "assigned":
      return listener.assigned?.(event.tasks, { promoted: false });
    case "promoted":
      return listener.assigned?.(event.tasks, { promoted: true });
    case "revoked":
      return listener.revoked?.(event.tasks);
    case "lost":
      return listener.lost?.(event.tasks);
    case "learner_started":
      return listener.learnerStarted?.(event.tasks);
    case "learner_stopped":
      return listener.learnerStopped?.(event.tasks);
    case "standby_started":
      return listener.standbyStarted?.(event.tasks);
    case "standby_stopped":
      return listener.standbyStopped?.(event.tasks);
    case "draining":
      return listener.draining?.();
    case "drained":
      return listener.drained?.();
    case "fenced":
      return listener.fenced?.(event.rejoining);
    case "replaced":
      return listener.replaced?.(event.memberName);
    case "error":
      return listener.error?.(event.error);
  }
}
