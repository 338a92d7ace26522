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
 * - `keys`, `routes`, `routes-http`, `router`: for everyone outside the
 *   group, Kafka's partitioner and a router that keeps the group's routing
 *   table and answers who owns a key.
 */

export {
  checkConfig,
  checkEndpoint,
  ENDPOINT_BYTES_MAX,
  LagSource,
  MemberConfig,
  METADATA_KEY_BYTES_MAX,
  METADATA_PAIRS_MAX,
  METADATA_VALUE_BYTES_MAX,
  REQUEST_TIMEOUT_DEFAULT_MS,
} from "./config";
export { MemberEvent, MemberListener } from "./events";
export { Codes, Failure, HeartbeatError } from "./failure";
export { Key, keyBytes, murmur2, partitionForKey } from "./keys";
export { jsonLogger, LogFields, Logger, LogLevel, silentLogger } from "./logger";
export { LOAD_MAX, LOAD_THRESHOLD_DEFAULT, LoadItem, LoadReport, UTILISATION_MAX } from "./loads";
export { MachineConfig, MachineEvent, MemberMachine, retryBackoffMs, StopReason } from "./machine";
export { Member, MemberStopReason } from "./member";
export { readRuns, readTasks, TaskRun, TASKS_PER_LIST_MAX, TaskItem, WireError, writeTasks } from "./ranges";
export { checkRouterConfig, Router, RouterConfig, RouterNotReadyError, RoutesRefusedError, WAIT_MS_DEFAULT, WAIT_MS_MAX } from "./router";
export { Route, RouteError, RouteMember, RouteTable } from "./routes";
export { compareTasks, formatTask, Task, task, taskKey, TaskSet } from "./task";
export { Assignment } from "./tracker";
export { HeartbeatResult, heartbeatUrl, parseRetryAfter, Transport, TransportOptions } from "./transport";
export { decodeError, decodeResponse, encodeRequest, ErrorDetail, HeartbeatRequest, HeartbeatResponse, LagRow } from "./wire";
