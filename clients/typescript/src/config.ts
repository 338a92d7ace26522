/** What a member needs to know before it joins, checked before it starts. */

import { Logger } from "./logger";
import { Assignment } from "./tracker";
import { LagRow } from "./wire";
import { validLoadCapacity } from "./loads";

/** How long one heartbeat may take before it counts as lost, by default. */
export const REQUEST_TIMEOUT_DEFAULT_MS = 5_000;
/** The host's limits on what a member publishes (docs/routing.md). */
export const ENDPOINT_BYTES_MAX = 256;
export const METADATA_PAIRS_MAX = 16;
export const METADATA_KEY_BYTES_MAX = 64;
export const METADATA_VALUE_BYTES_MAX = 256;

/**
 * Where the application's lag figures come from: the state it keeps for
 * tasks it does not process (learners, standbys) lags behind their
 * changelogs. Called before every heartbeat; the rows replace the previous
 * report. A learner at or under the group's acceptable recovery lag counts
 * as caught up, and its task moves here.
 */
export type LagSource = (assignment: Assignment) => Iterable<LagRow>;

export interface MemberConfig {
  /** The host's base URL, or a cluster's bootstrap URLs (a list, or separated by commas). */
  readonly url: string | readonly string[];
  readonly group: string;
  /** The topics to subscribe to; at least one. */
  readonly topics: readonly string[];
  /** A static member's name (KIP-345): a restart under it gets its tasks back. */
  readonly memberName?: string | null;
  readonly rack?: string | null;
  /** This member's relative capacity, 1 or more (default 1). */
  readonly capacity?: number;
  /** The group's member token, sent as `Authorization: Bearer TOKEN`. */
  readonly memberToken?: string | null;
  /** How long one heartbeat may take (default 5 s). */
  readonly requestTimeoutMs?: number;
  /** Where this member serves (a URL or `host:port`), published in the group's routing table; change it with `member.setEndpoint`. */
  readonly endpoint?: string | null;
  /** Small string pairs published with the endpoint (zone, version, …). */
  readonly metadata?: Readonly<Record<string, string>>;
  /** The load this member can carry, in the group's load unit, reported when the host asks for loads; change it with `member.reportLoad`. */
  readonly loadCapacity?: number | null;
  /** How far (relative) a task's load may move from the value the host has before it is sent again (default 0.1: 10 %). */
  readonly loadThreshold?: number;
  /** Lag figures for every heartbeat (default: none). */
  readonly lags?: LagSource;
  /** Where the member logs (default: JSON lines on stderr, warnings and errors). */
  readonly logger?: Logger;
  /** Aborting it makes the member leave the group. */
  readonly signal?: AbortSignal;
}

/** The bootstrap URLs of `config`, in order. */
export function urlsOf(config: MemberConfig): string[] {
  const list = typeof config.url === "string" ? config.url.split(",") : [...config.url];
  return list.map((url) => url.trim()).filter((url) => url !== "");
}

/** Throws a `TypeError` for what cannot work, without asking the host. */
export function checkConfig(config: MemberConfig): void {
  const fail = (message: string): never => {
    throw new TypeError(`invalid member config: ${message}`);
  };
  if (urlsOf(config).length === 0) fail("no host URL");
  if (!config.group) fail("the group name is empty");
  if (config.topics.length === 0) fail("a member must subscribe to at least one topic");
  if (config.memberName === "") fail("a static member's name must not be empty");
  const capacity = config.capacity ?? 1;
  if (!Number.isInteger(capacity) || capacity < 1 || capacity > 0xffff_ffff) fail("capacity must be an integer from 1");
  const timeout = config.requestTimeoutMs ?? REQUEST_TIMEOUT_DEFAULT_MS;
  if (!(timeout > 0) || !Number.isFinite(timeout)) fail("the request timeout must be above zero");
  const token = config.memberToken;
  if (token !== undefined && token !== null && !/^[\x21-\x7e]+$/.test(token)) {
    fail("a member token must be visible ASCII characters, at least one");
  }
  const threshold = config.loadThreshold ?? 0.1;
  if (!(threshold >= 0) || !Number.isFinite(threshold)) fail("the load threshold must be a finite number, 0 or more");
  if (!validLoadCapacity(config.loadCapacity ?? null)) fail("a load capacity must be above 0 and at most 1e15");
  checkEndpoint(config.endpoint ?? null, config.metadata ?? {});
}

/**
 * Throws a `TypeError` for an endpoint or metadata past the host's limits,
 * so that a mistake fails where it is made rather than as the host's
 * refusal of a heartbeat.
 */
export function checkEndpoint(endpoint: string | null, metadata: Readonly<Record<string, string>>): void {
  const fail = (message: string): never => {
    throw new TypeError(`invalid member endpoint: ${message}`);
  };
  const bytes = (text: string): number => Buffer.byteLength(text, "utf8");
  if (endpoint !== null && (!/^[\x21-\x7e]+$/.test(endpoint) || endpoint.length > ENDPOINT_BYTES_MAX)) {
    fail(`an endpoint must be 1 to ${ENDPOINT_BYTES_MAX} bytes of visible ASCII: ${JSON.stringify(endpoint)}`);
  }
  const pairs = Object.entries(metadata);
  if (pairs.length > METADATA_PAIRS_MAX) fail(`at most ${METADATA_PAIRS_MAX} metadata pairs, not ${pairs.length}`);
  for (const [key, value] of pairs) {
    if (typeof value !== "string") fail(`metadata values must be strings: ${JSON.stringify(key)}`);
    if (key === "" || bytes(key) > METADATA_KEY_BYTES_MAX) {
      fail(`a metadata key must be 1 to ${METADATA_KEY_BYTES_MAX} bytes: ${JSON.stringify(key)}`);
    }
    if (bytes(value) > METADATA_VALUE_BYTES_MAX) {
      fail(`a metadata value must be at most ${METADATA_VALUE_BYTES_MAX} bytes: ${JSON.stringify(key)}`);
    }
    if (/\p{Cc}/u.test(key + value)) fail(`metadata must be visible characters: ${JSON.stringify(key)}`);
  }
}
