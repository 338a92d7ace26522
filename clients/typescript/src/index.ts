/**
 * `@assignd/client`: the TypeScript member library for assignd.
 *
 * A member joins a group over HTTP, heartbeats at the host's interval, and
 * is told which tasks (topic, partition) to process:
 *
 * ```ts
 * const member = Member.start(
 *   { url: "http://127.0.0.1:7070", group: "billing", topics: ["orders"] },
 *   {
 *     assigned: (tasks) => start(tasks),
 *     revoked: async (tasks) => await stop(tasks), // acknowledged once it resolves
 *     lost: (tasks) => stopNow(tasks),
 *   },
 * );
 * ```
 *
 * - `task`, `ranges`, `wire`: tasks and the JSON bodies.
 * - `tracker`, `lease`, `machine`: the member machine (sans-IO), a port of
 *   the Rust client's, proven by the conformance vectors.
 * - `http`, `transport`: one heartbeat over HTTP/1.1 and its classification.
 * - `member`: the shell that runs the machine on node's event loop.
 */

export { checkConfig, LagSource, MemberConfig, REQUEST_TIMEOUT_DEFAULT_MS } from "./config";
export { MemberEvent, MemberListener } from "./events";
export { Codes, Failure, HeartbeatError } from "./failure";
export { jsonLogger, LogFields, Logger, LogLevel, silentLogger } from "./logger";
export { MachineConfig, MachineEvent, MemberMachine, retryBackoffMs, StopReason } from "./machine";
export { Member, MemberStopReason } from "./member";
export { readTasks, TASKS_PER_LIST_MAX, TaskItem, WireError, writeTasks } from "./ranges";
export { compareTasks, formatTask, Task, task, taskKey, TaskSet } from "./task";
export { Assignment } from "./tracker";
export { HeartbeatResult, heartbeatUrl, parseRetryAfter, Transport, TransportOptions } from "./transport";
export { decodeError, decodeResponse, encodeRequest, ErrorDetail, HeartbeatRequest, HeartbeatResponse, LagRow } from "./wire";
