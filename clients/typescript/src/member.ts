/**
 * The member shell: runs one {@link MemberMachine} over HTTP on node's
 * event loop. It sends what the machine builds (in the background, so the
 * lease timer fires while a heartbeat is in flight), sleeps until the
 * machine's timeout, passes answers, failures, acknowledgements, drains
 * and leaves in with the time, and hands the machine's events to the
 * listener one at a time. Every decision is the machine's; HTTP is the
 * transport's.
 */

import { randomBytes } from "node:crypto";
import { EventEmitter } from "node:events";

import { checkConfig, checkEndpoint, LagSource, MemberConfig, REQUEST_TIMEOUT_DEFAULT_MS, urlsOf } from "./config";
import { dispatch, MemberEvent, MemberListener } from "./events";
import { HeartbeatError } from "./failure";
import { jsonLogger, Logger } from "./logger";
import { validLoad, validLoadCapacity, validUtilisation } from "./loads";
import { MachineEvent, MemberMachine, StopReason } from "./machine";
import { formatTask, Task } from "./task";
import { Assignment } from "./tracker";
import { HeartbeatResult, Transport } from "./transport";
import { HeartbeatRequest } from "./wire";

/** Why a member stopped: the machine's reasons, or `aborted` (stopped without leaving). */
export type MemberStopReason = StopReason | "aborted";

/** The prefix of the ids a member chooses: `c-` and 32 random hex digits. */
function chooseIdPrefix(): string {
  return `c-${randomBytes(16).toString("hex")}`;
}

/** A machine event, queued for the listener with what the shell adds to it. */
type Queued = { readonly event: MemberEvent; readonly ack: number | null };

/**
 * A running member. Start one with {@link Member.start}; it joins at once.
 * It also emits `"event"` (a {@link MemberEvent}, after the listener's hook
 * returned) and `"stopped"` (a {@link MemberStopReason}).
 */
export class Member extends EventEmitter {
  private readonly origin = performance.now();
  private readonly machine: MemberMachine;
  private readonly transport: Transport;
  private readonly log: Logger;
  private readonly lagSource: LagSource | undefined;
  private readonly queue: Queued[] = [];
  private pumping = false;
  private sending = false;
  private timer: NodeJS.Timeout | null = null;
  private lastMessage = "";
  private aborted = false;
  /** Stopped: no more timers or requests. */
  private halted = false;
  private settled = false;
  private settle!: (reason: MemberStopReason) => void;
  /** Why the member stopped, once every event before it was delivered. */
  readonly closed: Promise<MemberStopReason>;

  private constructor(
    config: MemberConfig,
    private readonly listener: MemberListener,
  ) {
    super();
    this.log = config.logger ?? jsonLogger("warn");
    this.lagSource = config.lags;
    this.transport = new Transport({
      urls: urlsOf(config),
      group: config.group,
      memberToken: config.memberToken ?? null,
      requestTimeoutMs: config.requestTimeoutMs ?? REQUEST_TIMEOUT_DEFAULT_MS,
    });
    this.machine = new MemberMachine(
      {
        memberName: config.memberName ?? null,
        topics: [...config.topics],
        rack: config.rack ?? null,
        capacity: config.capacity ?? 1,
        idPrefix: chooseIdPrefix(),
        endpoint: config.endpoint ?? null,
        metadata: { ...(config.metadata ?? {}) },
        loadThreshold: config.loadThreshold,
      },
      this.now(),
      this.log,
    );
    this.machine.setLoadCapacity(config.loadCapacity ?? null);
    this.closed = new Promise((resolve) => (this.settle = resolve));
  }

  /**
   * Starts a member: it joins at once and tells `listener` what to do.
   * Throws a `TypeError` for a config that cannot work.
   */
  static start(config: MemberConfig, listener: MemberListener = {}): Member {
    checkConfig(config);
    const member = new Member(config, listener);
    const { signal } = config;
    if (signal?.aborted) {
      member.leave().catch(() => {});
    } else {
      signal?.addEventListener("abort", () => member.leave().catch(() => {}), { once: true });
    }
    setImmediate(() => member.step());
    return member;
  }

  /** The member id, once joined. */
  get memberId(): string | null {
    return this.machine.memberId;
  }

  /**
   * The member epoch (0 until joined): a fencing token. Pass it with each
   * write on a task's data; a store that keeps the highest epoch it saw
   * per task refuses a stale owner's late write.
   */
  get epoch(): number {
    return this.machine.memberEpoch;
  }

  /** The assignment as the machine sees it (the listener may be a step behind). */
  get assignment(): Assignment {
    return this.machine.assignment;
  }

  /** Why it stopped, or null while it runs. */
  get stopped(): StopReason | null {
    return this.machine.stopped;
  }

  /** Wall-clock time (ms since the epoch) until which held tasks may be processed, if a lease is known. */
  get leaseUntil(): number | null {
    const until = this.machine.leaseUntil;
    return until === null ? null : Date.now() + (until - this.now());
  }

  /**
   * Whether the application may process (and commit the output of) `task`
   * now: it is active here, or revoked and not yet acknowledged, and the
   * lease has not run out (and the member has not stopped). Check it
   * before each commit: a stalled process then never writes after its task
   * went elsewhere.
   */
  mayProcess(task: Task): boolean {
    return !this.halted && !this.aborted && this.machine.mayProcess(task, this.now());
  }

  /** Asks the host to drain this member: its tasks move as their new owners warm up, then it leaves. */
  drain(): void {
    this.machine.drain(this.now());
    this.step();
  }

  /**
   * Publishes `endpoint` (null: none) and `metadata` in place of the
   * config's: the next heartbeat carries them, and every later one until
   * the host has answered one that did. Throws a `TypeError` past the
   * host's limits, changing nothing.
   */
  setEndpoint(endpoint: string | null, metadata: Readonly<Record<string, string>> = {}): void {
    checkEndpoint(endpoint, metadata);
    this.machine.setEndpoint(endpoint, metadata);
  }

  /**
   * Sets the current load of active tasks, in the group's load unit
   * (`[task, load]` pairs or a `Map`), and, when given, the member's
   * measured `utilisation` (1.0: fully used) and the `loadCapacity` it can
   * carry. They go with a later heartbeat once the host asks for loads:
   * all of them after a join or a coordinator change, else those that
   * moved by more than the config's `loadThreshold`. A task not active
   * here is ignored, and a task's load is forgotten once it stops being
   * active. Throws a `TypeError` for a value the host would refuse,
   * changing nothing; it sends no heartbeat itself.
   */
  reportLoad(
    loads: Iterable<readonly [Task, number]>,
    options: { readonly utilisation?: number; readonly loadCapacity?: number } = {},
  ): void {
    const pairs = [...loads];
    for (const [task, load] of pairs) {
      if (!validLoad(load)) throw new TypeError(`the load ${load} of ${formatTask(task)} is not a number from 0 to 1e15`);
    }
    if (options.utilisation !== undefined && !validUtilisation(options.utilisation)) {
      throw new TypeError(`a utilisation must be a number from 0 to 10, not ${options.utilisation}`);
    }
    if (options.loadCapacity !== undefined && !validLoadCapacity(options.loadCapacity)) {
      throw new TypeError(`a load capacity must be above 0 and at most 1e15, not ${options.loadCapacity}`);
    }
    for (const [task, load] of pairs) this.machine.setLoad(task, load);
    if (options.utilisation !== undefined) this.machine.setUtilisation(options.utilisation);
    if (options.loadCapacity !== undefined) this.machine.setLoadCapacity(options.loadCapacity);
  }

  /**
   * Leaves the group (after the heartbeat in flight, if any) and stops.
   * Stop processing first: a dynamic member's tasks go to others at once.
   * Resolves once stopped; rejects with a {@link HeartbeatError} if the
   * leave itself failed (the host then notices at the session timeout).
   */
  async leave(): Promise<void> {
    this.machine.leave(this.now());
    this.step();
    await this.closed;
    const failure = this.machine.leaveFailure;
    if (failure !== null) throw new HeartbeatError(failure, this.lastMessage);
  }

  /** Stops at once without leaving, as a crash would: the host notices at the session timeout. */
  abort(): void {
    if (this.aborted || this.settled) return;
    this.aborted = true;
    this.queue.length = 0;
    this.halt();
    this.finish("aborted");
  }

  private now(): number {
    return Math.floor(performance.now() - this.origin);
  }

  /** Passes the time in, hands out events, sends what is due, and sleeps until the next timeout. */
  private step(): void {
    if (this.aborted || this.halted) return;
    const now = this.now();
    this.machine.tick(now);
    this.collect();
    if (this.machine.stopped !== null) {
      this.halt();
      return;
    }
    if (!this.sending && this.machine.requestDue(now)) {
      this.reportLags();
      const request = this.machine.pollRequest(now);
      if (request !== null) this.send(request);
    }
    this.sleep(now);
  }

  private sleep(now: number): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    const wake = this.machine.pollTimeout();
    // At least 1 ms: a timer that fires early finds nothing to do and sleeps again.
    if (wake !== null) this.timer = setTimeout(() => this.step(), Math.max(1, wake - now));
  }

  private halt(): void {
    this.halted = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.transport.close();
    void this.pump();
  }

  private reportLags(): void {
    if (this.lagSource === undefined) return;
    try {
      this.machine.reportLags([...this.lagSource(this.machine.assignment)]);
    } catch (error) {
      this.log.error("the lag source failed: the last report is sent again", { error: String(error) });
    }
  }

  private send(request: HeartbeatRequest): void {
    this.sending = true;
    this.transport
      .heartbeat(request)
      .catch((error): HeartbeatResult => ({ ok: false, failure: { kind: "unreadable" }, message: String(error) }))
      .then((result) => {
        this.sending = false;
        if (this.aborted) return;
        const now = this.now();
        if (result.ok) {
          this.machine.onAnswer(result.response, now);
        } else {
          this.log.debug("heartbeat failed", { member_id: this.machine.memberId, failure: result.failure, message: result.message });
          this.lastMessage = result.message;
          this.machine.onFailure(result.failure, now);
        }
        this.step();
      });
  }

  /** Moves the machine's events to the listener's queue. */
  private collect(): void {
    for (let event = this.machine.pollEvent(); event !== undefined; event = this.machine.pollEvent()) {
      this.queue.push(this.toMemberEvent(event));
    }
    void this.pump();
  }

  private toMemberEvent(event: MachineEvent): Queued {
    switch (event.type) {
      case "revoked":
        return { event: { type: "revoked", tasks: event.tasks }, ack: event.ack };
      case "error":
        // The machine queues an error only for the failure just passed in.
        return { event: { type: "error", error: new HeartbeatError(event.failure, this.lastMessage) }, ack: null };
      default:
        return { event, ack: null };
    }
  }

  /** Delivers queued events one at a time, in order; settles `closed` once stopped and drained. */
  private async pump(): Promise<void> {
    if (this.pumping) return;
    this.pumping = true;
    try {
      for (let next = this.queue.shift(); next !== undefined; next = this.queue.shift()) {
        await this.deliver(next);
      }
    } finally {
      this.pumping = false;
    }
    const reason = this.machine.stopped;
    if (reason !== null && this.queue.length === 0 && !this.aborted) this.finish(reason);
  }

  private async deliver({ event, ack }: Queued): Promise<void> {
    try {
      await dispatch(this.listener, event);
    } catch (error) {
      this.log.error(`the listener failed on ${event.type}`, { error: String(error), member_id: this.machine.memberId });
      // An unacknowledged revocation keeps the tasks this member's until the host fences it.
      if (ack !== null) return;
    }
    if (this.aborted) return;
    if (ack !== null) {
      this.machine.ack(ack, this.now());
      this.step();
    }
    try {
      this.emit("event", event);
    } catch (error) {
      this.log.error(`an "event" handler failed on ${event.type}`, { error: String(error) });
    }
  }

  private finish(reason: MemberStopReason): void {
    if (this.settled) return;
    this.settled = true;
    this.settle(reason);
    try {
      this.emit("stopped", reason);
    } catch (error) {
      this.log.error(`a "stopped" handler failed`, { error: String(error) });
    }
  }
}
