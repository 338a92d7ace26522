/**
 * One heartbeat over HTTP/1.1: encode, send with a timeout, classify. It
 * owns the URL layout, where a heartbeat goes (a cluster's redirects and
 * bootstrap URLs) and the mapping of HTTP outcomes to the machine's
 * failures; it holds no member state.
 *
 * In a cluster any node answers: one that does not coordinate the group
 * answers 307 with the coordinator's URL, which is followed at once (up to
 * {@link REDIRECTS_MAX} hops) and remembered. When the remembered node stops
 * answering, the transport asks the bootstrap URLs again, in turn, each
 * once per heartbeat. A shard between owners (503 `shard_unavailable` or
 * `coordinator_unreachable`) is retried within the request timeout.
 *
 * A failed heartbeat whose every attempt was refused a connection (never
 * sent), redirected, or answered 503 `shard_unavailable` certainly reached
 * no coordinator: it fails `unreached`, and the machine keeps its tasks on
 * the unreached lease. Anything else may have reached one.
 */

import { Agents, Answer, keepAliveAgents, post } from "./http";
import { Failure } from "./failure";
import { decodeError, decodeResponse, encodeRequest, HeartbeatRequest, HeartbeatResponse } from "./wire";

/** The most redirects one heartbeat follows. */
export const REDIRECTS_MAX = 5;
/** The longest `Retry-After` taken from the host, in seconds. */
const RETRY_AFTER_S_MAX = 60;
/** A shard between owners is asked again after this, doubling up to the max. */
const IN_TRANSIT_PAUSE_MIN_MS = 25;
const IN_TRANSIT_PAUSE_MAX_MS = 400;
/** The longest error body kept in a message. */
const ERROR_BODY_LEN_MAX = 512;

const NOT_COORDINATOR = "not_coordinator";
const SHARD_UNAVAILABLE = "shard_unavailable";
const COORDINATOR_UNREACHABLE = "coordinator_unreachable";

export interface TransportOptions {
  /** Bootstrap base URLs, e.g. `http://127.0.0.1:7070`. */
  readonly urls: readonly string[];
  readonly group: string;
  readonly memberToken?: string | null;
  readonly requestTimeoutMs: number;
  /** The connections to use (by default the transport's own, kept alive). */
  readonly agents?: Agents;
}

/** A heartbeat's result: the answer, or the failure with what happened. */
export type HeartbeatResult =
  | { readonly ok: true; readonly response: HeartbeatResponse }
  | { readonly ok: false; readonly failure: Failure; readonly message: string };

/** Where heartbeats go now: a bootstrap URL, or a coordinator a redirect named (and the bootstrap that led there). */
type Target = { readonly url: URL | null; readonly bootstrap: number };

/** What one attempt came back with. */
type Outcome =
  /** The heartbeat's result; no other node is tried. May have reached the coordinator. */
  | { readonly type: "done"; readonly result: HeartbeatResult }
  /** A failure after which no other node is tried, that reached no coordinator. */
  | { readonly type: "not_reached"; readonly failure: Failure; readonly message: string }
  /** Sent elsewhere: the node does not coordinate the group. */
  | { readonly type: "redirected"; readonly to: URL }
  /** The group's shard is between owners: ask again shortly. */
  | { readonly type: "in_transit"; readonly failure: Failure; readonly message: string; readonly mayHaveReached: boolean }
  /** No connection: the request never went out. */
  | { readonly type: "refused"; readonly message: string }
  /** The connection failed after the request may have gone out. */
  | { readonly type: "unanswered"; readonly message: string };

function mayHaveReached(outcome: Outcome): boolean {
  switch (outcome.type) {
    case "done":
    case "unanswered":
      return true;
    case "in_transit":
      return outcome.mayHaveReached;
    default:
      return false;
  }
}

/** The heartbeat URL of `group` at base URL `base`. */
export function heartbeatUrl(base: string, group: string): URL {
  let url: URL;
  try {
    url = new URL(base);
  } catch {
    throw new TypeError(`url ${JSON.stringify(base)} is not a URL`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new TypeError(`url ${JSON.stringify(base)} is not an http:// base URL`);
  }
  const path = url.pathname.replace(/\/+$/, "");
  url.pathname = `${path}/v1/groups/${encodeURIComponent(group)}/heartbeat`;
  return url;
}

/** `Retry-After` in seconds (the host sends no HTTP dates), capped, as ms. */
export function parseRetryAfter(value: string | string[] | undefined): number | null {
  const text = Array.isArray(value) ? value[0] : value;
  if (text === undefined || !/^\s*\d+\s*$/.test(text)) return null;
  return Math.min(Number(text.trim()), RETRY_AFTER_S_MAX) * 1000;
}

export class Transport {
  private readonly bootstrap: URL[];
  private target: Target = { url: null, bootstrap: 0 };
  private readonly headers: Record<string, string> = {};
  private readonly agents: Agents;
  private readonly ownAgents: boolean;

  constructor(private readonly options: TransportOptions) {
    this.bootstrap = options.urls.map((base) => heartbeatUrl(base, options.group));
    if (this.bootstrap.length === 0) throw new TypeError("no host URL");
    if (options.memberToken) this.headers.authorization = `Bearer ${options.memberToken}`;
    this.ownAgents = options.agents === undefined;
    this.agents = options.agents ?? keepAliveAgents();
  }

  /** Closes the transport's own idle connections. */
  close(): void {
    if (!this.ownAgents) return;
    this.agents.http.destroy();
    this.agents.https.destroy();
  }

  /** Where the next heartbeat goes, for logs. */
  get targetUrl(): string {
    return (this.target.url ?? this.bootstrap[this.target.bootstrap]).toString();
  }

  /** Where to go when `target` does not answer. */
  private next(target: Target): Target {
    if (target.url !== null) return { url: null, bootstrap: target.bootstrap };
    return { url: null, bootstrap: (target.bootstrap + 1) % this.bootstrap.length };
  }

  /**
   * Sends `request` to the group's coordinator, following redirects,
   * trying the bootstrap URLs when it does not answer and waiting out a
   * shard between owners, all within the request timeout.
   */
  async heartbeat(request: HeartbeatRequest): Promise<HeartbeatResult> {
    const body = JSON.stringify(encodeRequest(request));
    const deadline = performance.now() + this.options.requestTimeoutMs;
    let redirects = 0;
    let unreachableBootstraps = 0;
    let pause = IN_TRANSIT_PAUSE_MIN_MS;
    let reached = false;
    const failed = (failure: Failure, message: string): HeartbeatResult =>
      reached ? { ok: false, failure, message } : { ok: false, failure: { kind: "unreached" }, message };
    for (;;) {
      const target = this.target;
      const left = Math.floor(deadline - performance.now());
      if (left <= 0) return failed({ kind: "no_answer" }, `no answer within ${this.options.requestTimeoutMs} ms`);
      const outcome = await this.send(target.url ?? this.bootstrap[target.bootstrap], body, left);
      reached ||= mayHaveReached(outcome);
      switch (outcome.type) {
        case "done":
          return outcome.result;
        case "not_reached":
          return failed(outcome.failure, outcome.message);
        case "redirected":
          if (redirects >= REDIRECTS_MAX) {
            return failed({ kind: "no_answer" }, `more than ${REDIRECTS_MAX} redirects, the last to ${outcome.to}`);
          }
          redirects += 1;
          this.target = { url: outcome.to, bootstrap: target.bootstrap };
          break;
        case "in_transit": {
          if (deadline - performance.now() <= pause) return failed(outcome.failure, outcome.message);
          await new Promise((resolve) => setTimeout(resolve, pause));
          pause = Math.min(pause * 2, IN_TRANSIT_PAUSE_MAX_MS);
          break;
        }
        case "refused":
        case "unanswered":
          // A coordinator that died or left: ask the bootstrap URL that led to it again.
          if (target.url === null) unreachableBootstraps += 1;
          this.target = this.next(target);
          if (unreachableBootstraps >= this.bootstrap.length) return failed({ kind: "no_answer" }, outcome.message);
          break;
      }
    }
  }

  /** One attempt at `url` within `timeoutMs`. */
  private async send(url: URL, body: string, timeoutMs: number): Promise<Outcome> {
    const started = performance.now();
    let result = await post(url, body, this.headers, timeoutMs, this.agents);
    // A kept-alive connection the host closed while idle fails the moment
    // it is used, before the host read anything (it closes only idle
    // connections): that request is sent again on a new connection.
    if (!result.ok && result.error.kind === "lost" && result.error.reusedSocket) {
      const left = timeoutMs - Math.ceil(performance.now() - started);
      if (left > 0) result = await post(url, body, this.headers, left, this.agents);
    }
    if (!result.ok) {
      const { error } = result;
      if (error.kind === "not_connected") return { type: "refused", message: error.message };
      if (error.kind === "lost") return { type: "unanswered", message: error.message };
      if (error.kind === "cut_off") return { type: "done", result: { ok: false, failure: { kind: "no_answer" }, message: error.message } };
      // A node that stopped answering (paused, cut off): the next
      // heartbeat asks the (next) bootstrap URL.
      this.target = this.next(this.target);
      return { type: "done", result: { ok: false, failure: { kind: "no_answer" }, message: error.message } };
    }
    return classify(url, result.answer);
  }
}

/** An answer as a heartbeat's outcome. */
export function classify(url: URL, answer: Answer): Outcome {
  const { status } = answer;
  const redirected = status === 307 || status === 308;
  if (redirected) {
    const to = redirectTarget(url, answer.headers.location);
    if (to !== null) return { type: "redirected", to };
  }
  const retryAfterMs = parseRetryAfter(answer.headers["retry-after"]);
  if (status >= 200 && status < 300) {
    try {
      return { type: "done", result: { ok: true, response: decodeResponse(JSON.parse(answer.body)) } };
    } catch (error) {
      const message = `unreadable heartbeat answer: ${error instanceof Error ? error.message : String(error)}`;
      return { type: "done", result: { ok: false, failure: { kind: "unreadable" }, message } };
    }
  }
  const detail = decodeError(answer.body);
  const message = detail?.message ?? answer.body.slice(0, ERROR_BODY_LEN_MAX);
  const code = detail?.code ?? null;
  if (status === 503 && (code === SHARD_UNAVAILABLE || code === COORDINATOR_UNREACHABLE)) {
    const failure: Failure = { kind: "server", status, retryAfterMs };
    return { type: "in_transit", failure, message: describeRefusal(status, code, message), mayHaveReached: code !== SHARD_UNAVAILABLE };
  }
  let failure: Failure;
  if (code !== null && ((status >= 400 && status < 500) || code === NOT_COORDINATOR)) {
    failure = { kind: "refused", status, code, retryAfterMs };
  } else if (status >= 500 && status < 600) {
    failure = { kind: "server", status, retryAfterMs };
  } else {
    failure = { kind: "unreadable" };
  }
  const described = describeRefusal(status, code, message);
  // A redirect without a usable location still says the node does not coordinate the group.
  if (redirected) return { type: "not_reached", failure, message: described };
  return { type: "done", result: { ok: false, failure, message: described } };
}

function redirectTarget(url: URL, location: string | undefined): URL | null {
  if (location === undefined) return null;
  try {
    const to = new URL(location, url);
    return to.protocol === "http:" || to.protocol === "https:" ? to : null;
  } catch {
    return null;
  }
}

function describeRefusal(status: number, code: string | null, message: string): string {
  return code === null ? `HTTP ${status}: ${message}` : `the host refused the request (${code}, HTTP ${status}): ${message}`;
}
