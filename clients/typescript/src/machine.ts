/**
 * The member machine: every decision of a member, without I/O. It owns the
 * member id and epoch, when the next request is due and what it carries,
 * the lease, the policy for every failure, drains and leaves, and the order
 * of the events the application is told. It never reads a clock, opens a
 * socket or sets a timer: the shell passes `now` (integer milliseconds from
 * any origin) with each input, sends what {@link MemberMachine.pollRequest}
 * builds, sleeps until {@link MemberMachine.pollTimeout} and hands out what
 * {@link MemberMachine.pollEvent} yields.
 *
 * A port of the Rust client's `machine.rs`, rule for rule; the rules are
 * listed in `clients/conformance/README.md` and proven by its vectors.
 */

import { Codes, Failure, failureCode, isTransient, retryAfterMs } from "./failure";
import { Lease } from "./lease";
import { LOAD_THRESHOLD_DEFAULT, LoadBook, LoadFields, validLoad, validLoadCapacity, validUtilisation } from "./loads";
import { Logger, silentLogger } from "./logger";
import { Task } from "./task";
import { Assignment, Change, Tracker } from "./tracker";
import { HeartbeatRequest, HeartbeatResponse, JOIN_EPOCH, LagRow, LEAVE_EPOCH } from "./wire";

/** The heartbeat interval used until the host names one. */
export const INTERVAL_BEFORE_JOIN_MS = 1_000;
/** The shortest interval followed, whatever the host says. */
export const INTERVAL_MIN_MS = 10;
/** The first retry delay; it doubles up to the max, never past the interval. */
export const RETRY_BACKOFF_MIN_MS = 50;
/** Kafka's `retry.backoff.max.ms`: a member reaches a coordinator that took over within a second. */
export const RETRY_BACKOFF_MAX_MS = 1_000;
/** How many times a leave is sent when the host does not answer. */
export const LEAVE_ATTEMPTS_MAX = 3;

/** Who the member is and what it subscribes to. */
export interface MachineConfig {
  /** A static member's name; null joins as a dynamic member. */
  readonly memberName: string | null;
  readonly topics: readonly string[];
  readonly rack: string | null;
  readonly capacity: number;
  /** Chosen ids are `{idPrefix}-{n}`, n = 1, 2, …: a fresh one per join, the same for its retries. */
  readonly idPrefix: string;
  /** Where the member serves (a URL or `host:port`), for the group's routing table; sent on every join. */
  readonly endpoint?: string | null;
  /** Small string pairs shown with the member in the routing table; sent on every join unless empty. */
  readonly metadata?: Readonly<Record<string, string>>;
  /** How far (relative) a task's load moves from the acknowledged value before it is sent again; absent: 0.1. */
  readonly loadThreshold?: number;
}

/** What the application must learn, in order. */
export type MachineEvent =
  | Change
  | { readonly type: "joined"; readonly memberId: string }
  | { readonly type: "fenced"; readonly rejoining: boolean }
  | { readonly type: "replaced"; readonly memberName: string }
  | { readonly type: "error"; readonly failure: Failure };

/** Why the machine stopped. */
export type StopReason = "left" | "drained" | "replaced" | "fenced" | "removed";

/** The wait after `failures` failed requests in a row (from 1). */
export function retryBackoffMs(failures: number, intervalMs: number): number {
  const doubling = 2 ** Math.min(Math.max(failures - 1, 0), 16);
  return Math.min(RETRY_BACKOFF_MIN_MS * doubling, RETRY_BACKOFF_MAX_MS, intervalMs);
}

interface InFlight {
  readonly sent: number;
  readonly leave: boolean;
  /** It carries an endpoint changed by {@link MemberMachine.setEndpoint}: should it fail, the next request carries it again. */
  readonly carriesEndpointChange: boolean;
}

/** A leave under way; `then` null: rejoin as a new member afterwards. */
interface Leaving {
  then: StopReason | null;
  attempts: number;
}

export class MemberMachine {
  private readonly tracker = new Tracker();
  private readonly lease = new Lease();
  private readonly events: MachineEvent[] = [];
  /** Empty until joined (and again before a rejoin). */
  private memberIdValue = "";
  private joinId = "";
  private idsChosen = 0;
  private epoch = JOIN_EPOCH;
  private intervalMs = INTERVAL_BEFORE_JOIN_MS;
  private failures = 0;
  private drainAsked = false;
  private leaveAsked = false;
  private lags: LagRow[] = [];
  /** The loads the application set, and what the host has of them. */
  private readonly loads: LoadBook;
  /** The endpoint and metadata changed since the last request that carried them was sent: the next one carries them. */
  private endpointChanged = false;
  private due: number;
  /**
   * Something the host must hear of at once happened (an ack, a drain
   * asked, tasks lost to the lease) after the request in flight, if any,
   * was built: the next request goes as soon as nothing is in flight.
   */
  private sendNow = false;
  private inFlight: InFlight | null = null;
  private leaving: Leaving | null = null;
  private leaveFailureValue: Failure | null = null;
  private stoppedValue: StopReason | null = null;

  /** A member that wants to join at `now`. */
  constructor(
    private config: MachineConfig,
    now: number,
    private readonly log: Logger = silentLogger,
  ) {
    this.due = now;
    this.loads = new LoadBook(config.loadThreshold ?? LOAD_THRESHOLD_DEFAULT);
    this.chooseJoinId();
  }

  /** The member id, once joined. */
  get memberId(): string | null {
    return this.memberIdValue === "" ? null : this.memberIdValue;
  }

  /** The member epoch: a fencing token for what the application writes. */
  get memberEpoch(): number {
    return this.epoch;
  }

  get assignment(): Assignment {
    return this.tracker.assignment();
  }

  get stopped(): StopReason | null {
    return this.stoppedValue;
  }

  /** The failure that ended the last leave (null if answered, or out already). */
  get leaveFailure(): Failure | null {
    return this.leaveFailureValue;
  }

  get isInFlight(): boolean {
    return this.inFlight !== null;
  }

  /** Whether {@link pollRequest} would build a request at `now` (ask the lag source first). */
  requestDue(now: number): boolean {
    return this.stoppedValue === null && this.inFlight === null && now >= this.due;
  }

  /** The application's lag figures; they replace the last and go in every later heartbeat. */
  reportLags(lags: readonly LagRow[]): void {
    this.lags = [...lags];
  }

  /**
   * The application's current load of `task`, in the group's unit; a task
   * not active here is ignored (a task's load is forgotten once it stops
   * being active). Returns whether the load is one the host accepts (0 to
   * 1e15); an invalid one changes nothing.
   */
  setLoad(task: Task, load: number): boolean {
    if (!validLoad(load)) return false;
    if (this.tracker.isActive(task)) this.loads.setLoad(task, load);
    return true;
  }

  /** The member's measured utilisation (1.0: fully used; null: unknown); returns whether the host accepts it. */
  setUtilisation(utilisation: number | null): boolean {
    if (!validUtilisation(utilisation)) return false;
    this.loads.utilisation = utilisation;
    return true;
  }

  /** The load the member can carry (null: unknown); returns whether the host accepts it. */
  setLoadCapacity(capacity: number | null): boolean {
    if (!validLoadCapacity(capacity)) return false;
    this.loads.loadCapacity = capacity;
    return true;
  }

  /** The request to send now, if one is due; it is in flight until an answer or failure. */
  pollRequest(now: number): HeartbeatRequest | null {
    if (!this.requestDue(now)) return null;
    const leave = this.leaving !== null;
    this.inFlight = { sent: now, leave, carriesEndpointChange: !leave && this.endpointChanged };
    this.sendNow = false;
    if (this.leaving !== null) {
      this.leaving.attempts += 1;
      // Once the host has the leave, a dynamic member's tasks go to
      // others at once: nothing is processed from its sending on.
      this.loseEverythingButId();
      return this.leaveRequest();
    }
    const request = this.heartbeatRequest(this.loads.build());
    this.endpointChanged = false;
    return request;
  }

  /**
   * The application serves elsewhere now (null: nowhere), with these
   * metadata: both replace the config's, and the next request (join or
   * heartbeat) carries them, as does every later one until an answer to
   * one that did. No request is made due by it.
   */
  setEndpoint(endpoint: string | null, metadata: Readonly<Record<string, string>>): void {
    this.config = { ...this.config, endpoint, metadata: { ...metadata } };
    this.endpointChanged = true;
  }

  /**
   * The `endpoint` and `metadata` a heartbeat carries: both, explicit (`""`
   * for none, `{}` for empty), after a change until an answer to a request
   * that carried them; else on a join, those set; else neither (the host
   * keeps what it has).
   */
  private endpointFields(joining: boolean): Pick<HeartbeatRequest, "endpoint" | "metadata"> {
    const endpoint = this.config.endpoint ?? null;
    const metadata = this.config.metadata ?? {};
    if (this.endpointChanged) return { endpoint: endpoint ?? "", metadata: { ...metadata } };
    if (joining) return { endpoint, metadata: Object.keys(metadata).length > 0 ? { ...metadata } : null };
    return { endpoint: null, metadata: null };
  }

  private heartbeatRequest(loads: LoadFields): HeartbeatRequest {
    const joining = this.memberIdValue === "";
    return {
      ...this.endpointFields(joining),
      ...loads,
      memberId: joining ? this.joinId : this.memberIdValue,
      memberName: this.config.memberName,
      memberEpoch: this.epoch,
      topics: joining ? [...this.config.topics] : null,
      rack: this.config.rack,
      capacity: this.config.capacity,
      owned: this.tracker.owned(),
      lags: [...this.lags],
      drain: this.drainAsked,
    };
  }

  private leaveRequest(): HeartbeatRequest {
    return {
      memberId: this.memberIdValue,
      memberName: this.config.memberName,
      memberEpoch: LEAVE_EPOCH,
      topics: null,
      rack: this.config.rack,
      capacity: this.config.capacity,
      owned: [],
      lags: [],
      drain: this.drainAsked,
    };
  }

  /** The 200 answer to the request in flight, at `now`. */
  onAnswer(response: HeartbeatResponse, now: number): void {
    const flight = this.takeInFlight("an answer");
    if (flight === null) return;
    if (flight.leave) {
      this.finishLeave(null, now);
      return;
    }
    this.failures = 0;
    if (this.lease.onUnreached) {
      this.log.info("a coordinator of the group answers again: off the unreached lease", this.logFields());
    }
    this.lease.take(response, flight.sent);
    const joined = this.memberIdValue === "";
    this.memberIdValue = response.memberId;
    this.epoch = response.memberEpoch;
    this.intervalMs = Math.max(response.heartbeatIntervalMs, INTERVAL_MIN_MS);
    const changes = this.tracker.onResponse(response);
    this.loads.answered(response.loadReport);
    this.forgetInactiveLoads();
    if (joined) this.events.push({ type: "joined", memberId: response.memberId });
    this.events.push(...changes);
    this.due = flight.sent + this.intervalMs;
    if (changes.some((c) => c.type === "drained") && this.leaving === null) this.beginLeave("drained", now);
    this.afterHeartbeat(now);
  }

  /** The request in flight failed, as `failure` says, at `now`. */
  onFailure(failure: Failure, now: number): void {
    const flight = this.takeInFlight("a failure");
    if (flight === null) return;
    // The host may not have it: the next request carries it again.
    if (flight.carriesEndpointChange) this.endpointChanged = true;
    if (flight.leave) {
      this.leaveFailed(failure, now);
    } else {
      this.loads.failed();
      this.judgeLease(failure);
      this.heartbeatFailed(failure, flight.sent, now);
      this.afterHeartbeat(now);
    }
    this.settleLeave(now);
  }

  /**
   * After a heartbeat's outcome: a leave, an ack, a drain or a loss that
   * came while it was in flight goes at once.
   */
  private afterHeartbeat(now: number): void {
    if (this.leaving !== null || this.sendNow) this.due = Math.min(this.due, now);
    this.settleLeave(now);
  }

  /** The host must hear of a change at once (after the request in flight, if any). */
  private hurry(now: number): void {
    this.due = Math.min(this.due, now);
    this.sendNow = true;
  }

  private takeInFlight(what: string): InFlight | null {
    const flight = this.inFlight;
    if (flight === null) {
      this.log.error(`${what} with no request in flight: ignored`, this.logFields());
      return null;
    }
    this.inFlight = null;
    return flight;
  }

  private judgeLease(failure: Failure): void {
    if (!this.lease.judge(failure, this.tracker.isReleasing())) return;
    if (this.lease.onUnreached) {
      this.log.info(
        "no heartbeat reaches a coordinator of the group: keeping the tasks on the unreached lease",
        { ...this.logFields(), ...this.lease.describe() },
      );
    } else {
      this.log.info("a heartbeat may have reached the coordinator: back on the last answer's lease", this.logFields());
    }
  }

  private heartbeatFailed(failure: Failure, sent: number, now: number): void {
    const joined = this.memberIdValue !== "";
    const code = failureCode(failure);
    if (code === Codes.REPLACED) {
      // Refused to a join too: a retried join whose first attempt
      // the host handled, after which another process took the name.
      this.replaced();
      return;
    }
    if (joined && code !== null && this.refusedWhileJoined(code, failure, sent, now)) return;
    this.events.push({ type: "error", failure });
    if (!joined && code === Codes.FENCED) {
      // A join whose id the host already removed (a retry that came after
      // the member expired): join anew.
      this.chooseJoinId();
      this.retryLater(sent);
      return;
    }
    this.retryLater(sent);
    this.pauseAsAsked(failure, sent, now, joined);
  }

  /** Another process joined with this member's name: lose everything and stop. */
  private replaced(): void {
    const memberName = this.config.memberName ?? "";
    this.log.error(
      "another process joined with this member name and took its tasks: stopping this member (two processes must not share a member name)",
      { ...this.logFields(), member_name: memberName },
    );
    this.loseEverything();
    this.events.push({ type: "replaced", memberName });
    this.stop("replaced");
  }

  /** Acts on a refusal of a joined member's heartbeat; false if `code` needs no special policy. */
  private refusedWhileJoined(code: string, failure: Failure, sent: number, now: number): boolean {
    const leaving = this.drainAsked || this.leaveAsked || this.tracker.assignment().draining;
    switch (code) {
      case Codes.FENCED:
        this.loseEverything();
        this.events.push({ type: "fenced", rejoining: !leaving });
        if (leaving) this.stop("fenced");
        this.due = sent;
        return true;
      case Codes.UNKNOWN_MEMBER:
      case Codes.UNKNOWN_GROUP:
        // The slot is gone (expired, or the group deleted): every task may
        // be elsewhere already. Start over as a new member.
        this.events.push({ type: "error", failure });
        this.loseEverything();
        if (leaving) this.stop("removed");
        else if (code === Codes.UNKNOWN_GROUP) this.retryLater(sent);
        else this.due = sent;
        return true;
      case Codes.STALE_EPOCH:
        this.events.push({ type: "error", failure });
        if (this.config.memberName !== null) {
          // A new incarnation of the name takes the slot with its tasks.
          this.forgetMemberId();
        } else {
          this.loseEverythingButId();
          // Free the old slot's tasks now rather than at its session timeout.
          this.beginLeave(null, now);
        }
        this.due = sent;
        return true;
      default:
        return false;
    }
  }

  /**
   * The host asked for a pause (a join rate limit, a connection cap),
   * counted from its answer; a joined member waits no longer than its
   * interval, so its session holds.
   */
  private pauseAsAsked(failure: Failure, sent: number, now: number, joined: boolean): void {
    const asked = retryAfterMs(failure);
    if (asked === null) return;
    const hint = joined ? Math.min(asked, this.intervalMs) : asked;
    const backoff = this.due - sent;
    this.due = now + Math.max(backoff, hint);
  }

  private retryLater(sent: number): void {
    this.failures += 1;
    this.due = sent + retryBackoffMs(this.failures, this.intervalMs);
  }

  /** The application stopped the tasks of revocation `ack`: a heartbeat releases them at once. */
  ack(ack: number, now: number): void {
    const { known, changes } = this.tracker.onAck(ack);
    if (!known) return;
    this.events.push(...changes);
    this.hurry(now);
  }

  /** The application asks the host to drain this member. */
  drain(now: number): void {
    if (this.drainAsked || this.stoppedValue !== null) return;
    this.drainAsked = true;
    this.hurry(now);
  }

  /** Leave the group: a leave goes next (after the request in flight), then the machine stops. */
  leave(now: number): void {
    if (this.stoppedValue !== null) return;
    this.leaveAsked = true;
    if (this.leaving !== null) this.leaving.then = "left";
    else this.beginLeave("left", now);
    this.settleLeave(now);
  }

  /**
   * Time passed: once the lease in force ran out with no newer answer,
   * every held task stops. The id is kept, since the host may still count
   * the member; then the next answer (sent at once) assigns them again.
   */
  tick(now: number): void {
    if (this.stoppedValue !== null || !this.tracker.holdsAny()) return;
    const end = this.leaseUntil;
    if (end === null || now < end) return;
    const held = this.tracker.assignment();
    const why = this.lease.onUnreached
      ? "the unreached lease ran out with no heartbeat reaching a coordinator of the group: stopping every task"
      : "the lease of the last answer ran out without a newer answer from the host: stopping every task";
    this.log.warn(why, {
      ...this.logFields(),
      active: held.active.length,
      revoking: held.revoking.length,
      late_ms: now - end,
    });
    this.loseEverythingButId();
    this.hurry(now);
  }

  /** The next event for the application. */
  pollEvent(): MachineEvent | undefined {
    return this.events.shift();
  }

  /**
   * When the machine next wants an input if nothing else happens: the next
   * request (unless one is in flight), or the end of the lease in force
   * while it holds tasks; null once stopped.
   */
  pollTimeout(): number | null {
    if (this.stoppedValue !== null) return null;
    const due = this.inFlight === null ? this.due : null;
    const lease = this.tracker.holdsAny() ? this.leaseUntil : null;
    if (due !== null && lease !== null) return Math.min(due, lease);
    return due ?? lease;
  }

  /** The end of the lease in force; null before any answer with a lease. */
  get leaseUntil(): number | null {
    return this.lease.end(this.inFlight === null ? null : this.inFlight.sent);
  }

  /**
   * Whether the application may process (and commit the output of) `task`
   * at `now`: active here, or being released and not yet acknowledged, and
   * the lease in force has not run out.
   */
  mayProcess(task: Task, now: number): boolean {
    const end = this.leaseUntil;
    return this.tracker.holds(task) && (end === null || now < end);
  }

  private beginLeave(then: StopReason | null, now: number): void {
    this.leaving = { then, attempts: 0 };
    this.leaveFailureValue = null;
    this.due = now;
  }

  /** Ends a leave that cannot be sent: nothing to leave, nothing in flight. */
  private settleLeave(now: number): void {
    if (this.leaving !== null && this.inFlight === null && this.memberIdValue === "") {
      this.finishLeave(null, now);
    }
  }

  private leaveFailed(failure: Failure, now: number): void {
    const attempts = this.leaving?.attempts ?? LEAVE_ATTEMPTS_MAX;
    const code = failureCode(failure);
    const outAlready =
      code === Codes.FENCED || code === Codes.REPLACED || code === Codes.UNKNOWN_MEMBER || code === Codes.UNKNOWN_GROUP;
    if (outAlready) this.finishLeave(null, now);
    else if (!isTransient(failure) || attempts >= LEAVE_ATTEMPTS_MAX) this.finishLeave(failure, now);
    else this.due = now + RETRY_BACKOFF_MIN_MS * 2 ** attempts;
  }

  private finishLeave(failure: Failure | null, now: number): void {
    const then = this.leaving?.then ?? null;
    this.leaving = null;
    if (failure !== null) this.log.warn("the leave failed", { ...this.logFields(), failure });
    this.leaveFailureValue = failure;
    this.forgetMemberId();
    if (then !== null) this.stop(then);
    else this.due = now;
  }

  private stop(reason: StopReason): void {
    this.leaving = null;
    this.stoppedValue ??= this.leaveAsked ? "left" : reason;
  }

  /** Tells the application every held task is lost, and forgets the member id. */
  private loseEverything(): void {
    this.loseEverythingButId();
    this.forgetMemberId();
  }

  private loseEverythingButId(): void {
    const lost = this.tracker.reset();
    this.forgetInactiveLoads();
    if (lost.length > 0) this.events.push({ type: "lost", tasks: lost });
  }

  /** Out of the group: the next join is a new member, with a new id. */
  private forgetMemberId(): void {
    this.memberIdValue = "";
    this.chooseJoinId();
    this.epoch = JOIN_EPOCH;
    // A new member's host has none of its loads, and asks for them.
    this.loads.reset();
  }

  private forgetInactiveLoads(): void {
    this.loads.retainActive((task) => this.tracker.isActive(task));
  }

  private chooseJoinId(): void {
    this.idsChosen += 1;
    this.joinId = `${this.config.idPrefix}-${this.idsChosen}`;
  }

  private logFields(): Record<string, unknown> {
    return { member_id: this.memberIdValue, member_epoch: this.epoch };
  }
}
