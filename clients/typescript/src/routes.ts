/**
 * A routing table as `GET /v1/groups/{group}/routes` answers it
 * (docs/routing.md), read once and indexed so that a lookup costs a few
 * array and map reads: per topic, the owner of each partition in an
 * `Int32Array`, and the few tasks that move, learn or stand by in maps by
 * partition. It does no I/O and reads no clock: freshness is judged at the
 * `nowMs` the caller passes (monotonic, `performance.now()`), against the
 * time the request that got the table was *sent*.
 */

import { Key, partitionForKey } from "./keys";
import { readRuns, TASKS_PER_LIST_MAX, WireError } from "./ranges";
import { compareTopics } from "./task";

const NOBODY = -1;

/** A lookup the table cannot answer: an unknown topic, a partition past its count, no table yet. */
export class RouteError extends Error {
  override name = "RouteError";
  constructor(
    /** `unknown_topic`, `partition_out_of_range` or `no_table`. */
    readonly code: "unknown_topic" | "partition_out_of_range" | "no_table",
    message: string,
  ) {
    super(message);
  }
}

/** A member as the routing table shows it. */
export interface RouteMember {
  readonly memberId: string;
  /** A static member's name; null for a dynamic member. */
  readonly memberName: string | null;
  /** Where it serves (a URL or `host:port`), as it published it. */
  readonly endpoint: string | null;
  readonly metadata: Readonly<Record<string, string>>;
}

/** Who processes one task, as one table says. */
export interface Route {
  readonly topic: string;
  readonly partition: number;
  /** The member processing the task now; null: nobody. */
  readonly owner: RouteMember | null;
  /** The member the task moves to, while it moves. */
  readonly movingTo: RouteMember | null;
  readonly learners: readonly RouteMember[];
  readonly standbys: readonly RouteMember[];
  /** The epoch of the table the route was read from. */
  readonly epoch: number;
  /** Within the table's ownership bound at the lookup: the owner, unless moving, is the only one processing the task. */
  readonly fresh: boolean;
}

/** One topic's routes: owners by partition, and the sparse rest. */
interface TopicIndex {
  readonly owners: Int32Array;
  readonly movingTo: Map<number, number>;
  readonly learners: Map<number, number[]>;
  readonly standbys: Map<number, number[]>;
}

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function object(value: unknown, field: string): Json {
  if (value === null || value === undefined) return {};
  if (!isObject(value)) throw new WireError(`${field}: not a JSON object`);
  return value;
}

function count(body: Json, field: string): number {
  const value = body[field];
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) {
    throw new WireError(`${field}: not a count (${JSON.stringify(value)})`);
  }
  return value;
}

function optionalText(value: unknown, field: string): string | null {
  if (value === null || value === undefined) return null;
  if (typeof value !== "string") throw new WireError(`${field}: not a string`);
  return value;
}

function readMember(memberId: string, value: unknown): RouteMember {
  const detail = object(value, `members.${memberId}`);
  const metadata = object(detail.metadata, `members.${memberId}.metadata`);
  if (!Object.values(metadata).every((v) => typeof v === "string")) {
    throw new WireError(`members.${memberId}.metadata: string values are required`);
  }
  return {
    memberId,
    memberName: optionalText(detail.member_name, "member_name"),
    endpoint: optionalText(detail.endpoint, "endpoint"),
    metadata: Object.freeze({ ...(metadata as Record<string, string>) }),
  };
}

function readTopics(body: Json): Map<string, number> {
  const topics = new Map<string, number>();
  let total = 0;
  for (const [name, value] of Object.entries(object(body.topics, "topics"))) {
    if (typeof value !== "number" || !Number.isInteger(value) || value < 0 || value > 0xffff_ffff) {
      throw new WireError(`topics.${name}: not a partition count (${JSON.stringify(value)})`);
    }
    topics.set(name, value);
    total += value;
  }
  // An index entry per task: bounded as the host bounds a group's tasks.
  if (total > TASKS_PER_LIST_MAX) throw new WireError(`more than ${TASKS_PER_LIST_MAX} tasks in one table`);
  return topics;
}

/** One routing table, indexed. Immutable once built: share it freely. */
export class RouteTable {
  readonly group: string;
  readonly epoch: number;
  readonly groupEpoch: number;
  readonly validMs: number;
  /** Each topic's partition count. */
  readonly topics: ReadonlyMap<string, number>;
  /** Every member the table names, by member id. */
  readonly members: ReadonlyMap<string, RouteMember>;
  private readonly memberList: RouteMember[];
  private readonly index: Map<string, TopicIndex>;

  /**
   * Reads `body` (the JSON answer) got by a request sent at `sentAtMs`
   * that waited `waitedMs` at the host before the table was read (its
   * `Assignd-Routes-Waited-Ms`); throws a {@link WireError} if it does not read as a table. Tasks of a
   * topic the table does not list, or past its count, cannot be looked up
   * and are left out.
   */
  constructor(
    /** The answer as it came, for what the index does not keep. */
    readonly body: Json,
    /** When the request that got the table was sent (`performance.now()` ms). */
    readonly sentAtMs: number,
    /** How long that request waited at the host before the table was read. */
    readonly waitedMs = 0,
    shared?: RouteTable,
  ) {
    if (!isObject(body)) throw new WireError("a routing table must be a JSON object");
    if (typeof body.group !== "string") throw new WireError("group: not a string");
    this.group = body.group;
    this.epoch = count(body, "epoch");
    this.groupEpoch = count(body, "group_epoch");
    this.validMs = count(body, "valid_ms");
    if (shared !== undefined) {
      this.topics = shared.topics;
      this.members = shared.members;
      this.memberList = shared.memberList;
      this.index = shared.index;
      return;
    }
    this.topics = readTopics(body);
    this.index = new Map();
    const listed = new Map(Object.entries(object(body.members, "members")).map(([id, v]) => [id, readMember(id, v)]));
    const active = object(body.active, "active");
    const learner = object(body.learner, "learner");
    const standby = object(body.standby, "standby");
    const moving = body.moving ?? [];
    if (!Array.isArray(moving) || !moving.every(isObject)) throw new WireError("moving: not a list of objects");
    // Every member a list names, listed in `members` or not, sorted by id:
    // indices then order learners and standbys by member id.
    const named = new Set([...listed.keys(), ...Object.keys(active), ...Object.keys(learner), ...Object.keys(standby)]);
    for (const move of moving) for (const end of [move.from, move.to]) if (typeof end === "string") named.add(end);
    this.memberList = [...named]
      .sort(compareTopics)
      .map((id) => listed.get(id) ?? { memberId: id, memberName: null, endpoint: null, metadata: {} });
    this.members = new Map(this.memberList.map((m) => [m.memberId, m]));
    this.build(active, learner, standby, moving);
  }

  private build(active: Json, learner: Json, standby: Json, moving: Json[]): void {
    const at = new Map(this.memberList.map((m, i) => [m.memberId, i]));
    for (const [name, partitions] of this.topics) {
      const owners = new Int32Array(partitions).fill(NOBODY);
      this.index.set(name, { owners, movingTo: new Map(), learners: new Map(), standbys: new Map() });
    }
    for (const [id, tasks] of Object.entries(active)) {
      for (const [topic, first, last] of this.runs(tasks, "active")) topic.owners.fill(at.get(id)!, first, last + 1);
    }
    for (const [lists, which] of [
      [learner, "learners"],
      [standby, "standbys"],
    ] as const) {
      for (const id of Object.keys(lists).sort(compareTopics)) {
        for (const [topic, first, last] of this.runs(lists[id], which)) {
          const byPartition = topic[which];
          for (let p = first; p <= last; p++) {
            const list = byPartition.get(p);
            if (list === undefined) byPartition.set(p, [at.get(id)!]);
            else list.push(at.get(id)!);
          }
        }
      }
    }
    for (const move of moving) {
      const to = typeof move.to === "string" ? at.get(move.to)! : NOBODY;
      for (const [topic, first, last] of this.runs(move.tasks, "moving")) {
        for (let p = first; p <= last; p++) topic.movingTo.set(p, to);
      }
    }
  }

  /** The runs of `tasks` that fall in known topics, clipped to them. */
  private *runs(tasks: unknown, field: string): Iterable<[TopicIndex, number, number]> {
    for (const [name, first, last] of readRuns(tasks, field)) {
      const topic = this.index.get(name);
      if (topic !== undefined && first < topic.owners.length) {
        yield [topic, first, Math.min(last, topic.owners.length - 1)];
      }
    }
  }

  /** No sooner than when the host read the table (the send time plus the wait it reported): the promise counts from here. */
  get readAtMs(): number {
    return this.sentAtMs + this.waitedMs;
  }

  /** The end of the ownership bound, in the clock of `sentAtMs`: the send time, plus the host's wait, plus `valid_ms`. */
  get freshUntilMs(): number {
    return this.readAtMs + this.validMs;
  }

  /** Whether the table is within its ownership bound at `nowMs`. */
  isFresh(nowMs: number): boolean {
    return nowMs < this.freshUntilMs;
  }

  /** The same table, confirmed by a request sent at `sentAtMs` that waited `waitedMs` (its index shared, not rebuilt). */
  resent(sentAtMs: number, waitedMs = 0): RouteTable {
    return new RouteTable(this.body, sentAtMs, waitedMs, this);
  }

  /** Who processes `partition` of `topic`; throws a {@link RouteError} for an unknown topic or a partition past its count. */
  route(topic: string, partition: number, nowMs: number): Route {
    const index = this.topicIndex(topic);
    if (!Number.isInteger(partition) || partition < 0 || partition >= index.owners.length) {
      throw new RouteError(
        "partition_out_of_range",
        `topic ${JSON.stringify(topic)} has ${index.owners.length} partitions: there is no partition ${partition}`,
      );
    }
    const member = (i: number | undefined): RouteMember | null => (i === undefined || i === NOBODY ? null : this.memberList[i]);
    const members = (list: number[] | undefined): RouteMember[] => (list ?? []).map((i) => this.memberList[i]);
    return {
      topic,
      partition,
      owner: member(index.owners[partition]),
      movingTo: member(index.movingTo.get(partition)),
      learners: members(index.learners.get(partition)),
      standbys: members(index.standbys.get(partition)),
      epoch: this.epoch,
      fresh: this.isFresh(nowMs),
    };
  }

  /** Who processes the partition `key` maps to (Kafka's default partitioner). */
  routeForKey(topic: string, key: Key, nowMs: number): Route {
    const partitions = this.topicIndex(topic).owners.length;
    if (partitions === 0) throw new RouteError("partition_out_of_range", `topic ${JSON.stringify(topic)} has no partitions`);
    return this.route(topic, partitionForKey(key, partitions), nowMs);
  }

  private topicIndex(topic: string): TopicIndex {
    const index = this.index.get(topic);
    if (index === undefined) {
      const where = `the routing table of group ${JSON.stringify(this.group)}`;
      throw new RouteError("unknown_topic", `${where} has no topic ${JSON.stringify(topic)}`);
    }
    return index;
  }
}
