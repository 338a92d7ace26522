/**
 * The heartbeat's JSON bodies as they cross HTTP: the request the member
 * sends, the answer it reads, and the host's error body. Field names are
 * the member protocol's; what they mean to a member is the machine's
 * business.
 */

import { readTasks, TaskItem, WireError, writeTasks } from "./ranges";
import { LoadItem, LoadReport, readLoadReport } from "./loads";
import { Task } from "./task";

/** The member epoch a join sends. */
export const JOIN_EPOCH = 0;
/** The member epoch a leave sends. */
export const LEAVE_EPOCH = -1;

/** A member's lag on one task: records its local state is behind. */
export interface LagRow {
  readonly task: Task;
  readonly lag: number;
}

/** `POST /v1/groups/{group}/heartbeat`: a join, a heartbeat or a leave. */
export interface HeartbeatRequest {
  readonly memberId: string;
  readonly memberName: string | null;
  /** 0 to join, -1 to leave, else the member's epoch. */
  readonly memberEpoch: number;
  /** Sent on a join only. */
  readonly topics: readonly string[] | null;
  readonly rack: string | null;
  readonly capacity: number;
  readonly owned: readonly Task[];
  readonly lags: readonly LagRow[];
  readonly drain: boolean;
  /** Where the member serves: on a join and after a change (`""` removes it); null or absent leaves it as the host has it. */
  readonly endpoint?: string | null;
  /** The pairs shown with the endpoint, replacing the host's; null or absent leaves them as they are. */
  readonly metadata?: Readonly<Record<string, string>> | null;
  /** Load items, sent only after an answer asked for loads; null or absent: none. */
  readonly loads?: readonly LoadItem[] | null;
  readonly utilisation?: number | null;
  readonly loadCapacity?: number | null;
}

/** The request as its JSON body: absent fields are left out. */
export function encodeRequest(request: HeartbeatRequest): Record<string, unknown> {
  const body: Record<string, unknown> = { member_id: request.memberId };
  if (request.memberName !== null) body.member_name = request.memberName;
  body.member_epoch = request.memberEpoch;
  if (request.topics !== null) body.topics = [...request.topics];
  body.rack = request.rack;
  body.capacity = request.capacity;
  body.owned = writeTasks(request.owned, true);
  body.lags = request.lags.map((row) => [row.task.topic, row.task.partition, row.lag]);
  body.drain = request.drain;
  // Ask for the answer's task lists as ranges too.
  body.task_ranges = true;
  if (request.endpoint !== undefined && request.endpoint !== null) body.endpoint = request.endpoint;
  if (request.metadata !== undefined && request.metadata !== null) body.metadata = { ...request.metadata };
  if (request.loads !== undefined && request.loads !== null) body.loads = request.loads.map((item) => [...item]);
  if (request.utilisation !== undefined && request.utilisation !== null) body.utilisation = request.utilisation;
  if (request.loadCapacity !== undefined && request.loadCapacity !== null) body.load_capacity = request.loadCapacity;
  return body;
}

/** The 200 answer to a heartbeat. */
export interface HeartbeatResponse {
  readonly memberId: string;
  readonly memberEpoch: number;
  readonly heartbeatIntervalMs: number;
  readonly active: readonly Task[];
  readonly revoking: readonly Task[];
  readonly learner: readonly Task[];
  readonly standby: readonly Task[];
  readonly draining: boolean;
  readonly drained: boolean;
  /** Counted from when the answered heartbeat was sent; null from a host before leases. */
  readonly leaseMs: number | null;
  /** The lease while no later heartbeat reaches a coordinator of the group. */
  readonly unreachedLeaseMs: number | null;
  /** While a heartbeat is in flight, the unreached lease ends at its send time plus this. */
  readonly unreachedFlightMs: number | null;
  /** What the next heartbeat reports of the member's loads ("none" when absent or unknown). */
  readonly loadReport: LoadReport;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function count(body: Record<string, unknown>, field: string): number {
  const value = body[field];
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) {
    throw new WireError(`${field}: not a count (${JSON.stringify(value)})`);
  }
  return value;
}

function optionalCount(body: Record<string, unknown>, field: string): number | null {
  return body[field] === undefined || body[field] === null ? null : count(body, field);
}

function flag(body: Record<string, unknown>, field: string): boolean {
  const value = body[field];
  if (value === undefined || value === null) return false;
  if (typeof value !== "boolean") throw new WireError(`${field}: not a boolean`);
  return value;
}

/**
 * Reads an answer body leniently, as the host writes it or an older host
 * did: a list, a flag or a lease left out reads as empty, false or
 * unknown. Throws {@link WireError} when it cannot be read.
 */
export function decodeResponse(body: unknown): HeartbeatResponse {
  if (!isObject(body)) throw new WireError("the heartbeat answer is not a JSON object");
  if (typeof body.member_id !== "string") throw new WireError("member_id: not a string");
  return {
    memberId: body.member_id,
    memberEpoch: count(body, "member_epoch"),
    heartbeatIntervalMs: count(body, "heartbeat_interval_ms"),
    active: readTasks(body.active, "active"),
    revoking: readTasks(body.revoking, "revoking"),
    learner: readTasks(body.learner, "learner"),
    standby: readTasks(body.standby, "standby"),
    draining: flag(body, "draining"),
    drained: flag(body, "drained"),
    leaseMs: optionalCount(body, "lease_ms"),
    unreachedLeaseMs: optionalCount(body, "unreached_lease_ms"),
    unreachedFlightMs: optionalCount(body, "unreached_flight_ms"),
    loadReport: readLoadReport(body.load_report),
  };
}

/** The host's error body `{"error": {"code", "message"}}`. */
export interface ErrorDetail {
  readonly code: string;
  readonly message: string;
}

/** The error body in `text`, or null when it is not one. */
export function decodeError(text: string): ErrorDetail | null {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return null;
  }
  if (!isObject(body) || !isObject(body.error)) return null;
  const { code, message } = body.error;
  if (typeof code !== "string" || typeof message !== "string") return null;
  return { code, message };
}

export type { TaskItem };
