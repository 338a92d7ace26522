/**
 * The router: who owns which key right now, for everyone outside a group.
 *
 * One async loop keeps a blocking query open on the group's routing table
 * (`GET /v1/groups/{group}/routes?after_epoch=E&wait_ms=W`) and holds the
 * newest table, indexed ({@link RouteTable}); lookups read it without a
 * round trip. While the table held promises an ownership bound
 * (`valid_ms`), a query waits at most half of it, so that in a quiet group
 * the next answer renews the bound before it runs out. The loop tries the host's URLs in turn while none answers,
 * follows redirects, honours `Retry-After`, and reports the host's
 * refusals (a wrong token, an unknown group) through {@link Router.ready}.
 */

import { EventEmitter } from "node:events";

import { jsonLogger, Logger } from "./logger";
import { Key } from "./keys";
import { WireError } from "./ranges";
import { Route, RouteError, RouteTable } from "./routes";
import { getRoutes, Outcome, routesUrl } from "./routes-http";

/** How long the host holds a blocking query open, by default and at most (the host refuses a longer wait). */
export const WAIT_MS_DEFAULT = 20_000;
export const WAIT_MS_MAX = 20_000;
/** What a query may take past `waitMs` before it counts as lost. */
export const REQUEST_SLACK_MS = 10_000;
/** The pause before asking the next URL after a failure, doubling. */
export const BACKOFF_MIN_MS = 100;
export const BACKOFF_MAX_MS = 2_000;
/** The pause before asking again after a refusal (401, 403, 404). */
export const REFUSED_RETRY_MS = 5_000;

export interface RouterConfig {
  /** The host's base URL, or a cluster's nodes (a list, or separated by commas), tried in turn while none answers. */
  readonly url: string | readonly string[];
  readonly group: string;
  /** The group's reader token or the admin token, sent as `Authorization: Bearer TOKEN`. */
  readonly token?: string | null;
  /** How long the host may hold each blocking query (default and at most 20,000 ms); while the table held promises a bound, at most half its `valid_ms`. */
  readonly waitMs?: number;
  /** How long one query may take (default `waitMs` + 10 s). */
  readonly requestTimeoutMs?: number;
  /** Where the router logs (default: JSON lines on stderr, warnings and errors). */
  readonly logger?: Logger;
  /** Aborting it closes the router. */
  readonly signal?: AbortSignal;
}

/** The host refused the routes query: `status`, and its error body's `code` (`forbidden`, `unauthorized`, `group_not_found`, …). */
export class RoutesRefusedError extends Error {
  override name = "RoutesRefusedError";
  constructor(
    readonly status: number,
    readonly code: string,
    readonly hostMessage: string,
  ) {
    super(`the host refused the routes query: ${status} ${code}: ${hostMessage}`);
  }
}

/** No table came within the time {@link Router.ready} was given, or the router closed first. */
export class RouterNotReadyError extends Error {
  override name = "RouterNotReadyError";
}

function urlsOf(config: RouterConfig): string[] {
  const list = typeof config.url === "string" ? config.url.split(",") : [...config.url];
  return list.map((url) => url.trim()).filter((url) => url !== "");
}

/** Throws a `TypeError` for a config that cannot work, without asking the host. */
export function checkRouterConfig(config: RouterConfig): void {
  const fail = (message: string): never => {
    throw new TypeError(`invalid router config: ${message}`);
  };
  const urls = urlsOf(config);
  if (urls.length === 0) fail("no host URL");
  if (!config.group) fail("the group name is empty");
  for (const url of urls) routesUrl(url, config.group, {});
  const waitMs = config.waitMs ?? WAIT_MS_DEFAULT;
  if (!Number.isInteger(waitMs) || waitMs < 0 || waitMs > WAIT_MS_MAX) {
    fail(`waitMs must be an integer from 0 to ${WAIT_MS_MAX} (the host's limit)`);
  }
  const timeout = config.requestTimeoutMs ?? waitMs + REQUEST_SLACK_MS;
  if (!(timeout > 0) || !Number.isFinite(timeout)) fail("the request timeout must be above zero");
  const token = config.token;
  if (token !== undefined && token !== null && !/^[\x21-\x7e]+$/.test(token)) {
    fail("a token must be visible ASCII characters, at least one");
  }
}

/**
 * Keeps the newest routing table of a group and answers who owns what.
 * Start one with {@link Router.start}. It emits `"change"` (the new
 * {@link RouteTable}) for each table whose epoch differs from the one held
 * before, the first included.
 */
export class Router extends EventEmitter {
  private readonly urls: string[];
  private readonly headers: Record<string, string>;
  private readonly waitMs: number;
  private readonly timeoutMs: number;
  private readonly log: Logger;
  private readonly closing = new AbortController();
  private urlIndex = 0;
  private held: RouteTable | null = null;
  private refusal: RoutesRefusedError | null = null;
  private lastFailure = "";
  private misroutesCount = 0;
  private refreshing = false;
  /** Told of every new table, refusal and the close, for `ready`. */
  private readonly waiters = new Set<() => void>();
  /** The loop; resolves once it ended. */
  readonly done: Promise<void>;

  private constructor(private readonly config: RouterConfig) {
    super();
    this.urls = urlsOf(config);
    this.headers = { accept: "application/json", "user-agent": "assignd-typescript-router" };
    if (config.token) this.headers.authorization = `Bearer ${config.token}`;
    this.waitMs = config.waitMs ?? WAIT_MS_DEFAULT;
    this.timeoutMs = config.requestTimeoutMs ?? this.waitMs + REQUEST_SLACK_MS;
    this.log = config.logger ?? jsonLogger("warn");
    this.done = this.run().catch((error) => this.log.error("the router loop failed", { error: String(error) }));
  }

  /** Starts a router: it asks for the table at once. Throws a `TypeError` for a config that cannot work. */
  static start(config: RouterConfig): Router {
    checkRouterConfig(config);
    const router = new Router(config);
    const { signal } = config;
    if (signal?.aborted) router.close();
    else signal?.addEventListener("abort", () => router.close(), { once: true });
    return router;
  }

  /** Stops the loop and ends the query under way. */
  close(): void {
    if (this.closing.signal.aborted) return;
    this.closing.abort();
    this.notify();
  }

  /**
   * Resolves with the first table (at once if there is one). Rejects with a
   * {@link RoutesRefusedError} if the host refused the query before any
   * table came, a {@link RouterNotReadyError} after `timeoutMs` or if the
   * router closes first.
   */
  ready(timeoutMs?: number): Promise<RouteTable> {
    return new Promise((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const check = (): boolean => {
        if (this.held !== null) resolve(this.held);
        else if (this.refusal !== null) reject(this.refusal);
        else if (this.closing.signal.aborted) reject(new RouterNotReadyError(`the router is closed${this.lastFailureText()}`));
        else return false;
        clearTimeout(timer);
        this.waiters.delete(waiter);
        return true;
      };
      const waiter = (): void => void check();
      if (check()) return;
      this.waiters.add(waiter);
      if (timeoutMs !== undefined) {
        timer = setTimeout(() => {
          this.waiters.delete(waiter);
          reject(new RouterNotReadyError(`no routing table within ${timeoutMs} ms${this.lastFailureText()}`));
        }, timeoutMs);
      }
    });
  }

  /**
   * The route of the partition `key` maps to (Kafka's default
   * partitioner; a string is hashed as its UTF-8 bytes). Throws a
   * {@link RouteError} for an unknown topic, or before the first table.
   */
  ownerOf(topic: string, key: Key): Route {
    return this.current().routeForKey(topic, key, performance.now());
  }

  /** The route of `partition` of `topic`; throws a {@link RouteError} for an unknown topic or a partition past its count. */
  ownerOfPartition(topic: string, partition: number): Route {
    return this.current().route(topic, partition, performance.now());
  }

  /** The newest table, or null before the first. */
  get table(): RouteTable | null {
    return this.held;
  }

  get epoch(): number | null {
    return this.held?.epoch ?? null;
  }

  /** Whether the table held is within its ownership bound now. */
  get fresh(): boolean {
    return this.held !== null && this.held.isFresh(performance.now());
  }

  /** Milliseconds since the request that got (or confirmed) the table was sent; null before the first. */
  get ageMs(): number | null {
    return this.held === null ? null : performance.now() - this.held.sentAtMs;
  }

  /** How many times {@link misrouted} was called. */
  get misroutes(): number {
    return this.misroutesCount;
  }

  /**
   * A member answered "not mine" for `route`: counts it and, if the route
   * came from the newest table held, asks for a newer one at once (besides
   * the blocking query, which tells of it too).
   */
  misrouted(route: Route): void {
    this.misroutesCount++;
    const held = this.held;
    if (held === null || route.epoch < held.epoch || this.refreshing || this.closing.signal.aborted) return;
    this.refreshing = true;
    void this.refresh().finally(() => (this.refreshing = false));
  }

  private current(): RouteTable {
    if (this.held === null) {
      throw new RouteError("no_table", `no routing table of group ${JSON.stringify(this.config.group)} yet: wait for ready()`);
    }
    return this.held;
  }

  private lastFailureText(): string {
    return this.lastFailure ? ` (last failure: ${this.lastFailure})` : "";
  }

  private notify(): void {
    for (const waiter of [...this.waiters]) waiter();
  }

  private ask(query: Record<string, number>): Promise<Outcome> {
    const url = routesUrl(this.urls[this.urlIndex], this.config.group, query);
    return getRoutes(url, this.headers, this.timeoutMs, this.closing.signal);
  }

  private async run(): Promise<void> {
    let after: number | null = null;
    let backoffMs = BACKOFF_MIN_MS;
    while (!this.closing.signal.aborted) {
      const sent = performance.now();
      let outcome = await this.ask(after === null ? {} : { after_epoch: after, wait_ms: this.waitFor(this.held) });
      if (this.closing.signal.aborted) break;
      if (outcome.kind === "table") {
        const table = this.read(outcome.body, sent, outcome.waitedMs);
        if (table !== null) {
          after = this.take(table, after).epoch;
          backoffMs = BACKOFF_MIN_MS;
          continue;
        }
        outcome = { kind: "unavailable", message: this.lastFailure, retryAfterMs: null };
      }
      if (outcome.kind === "refused") {
        this.refused(new RoutesRefusedError(outcome.status, outcome.code, outcome.message));
        await this.pause(REFUSED_RETRY_MS);
        continue;
      }
      this.lastFailure = outcome.message;
      this.log.debug("routes query failed: trying the next URL", { group: this.config.group, message: outcome.message });
      this.urlIndex = (this.urlIndex + 1) % this.urls.length;
      await this.pause(Math.max(backoffMs, outcome.retryAfterMs ?? 0));
      backoffMs = Math.min(backoffMs * 2, BACKOFF_MAX_MS);
    }
  }

  /**
   * How long a blocking query past `held` may wait: the configured wait,
   * or half the table's `valid_ms` when that is shorter (and the table
   * promises anything), so that the answer renews the bound before it runs
   * out.
   */
  private waitFor(held: RouteTable | null): number {
    if (held === null || held.validMs <= 0) return this.waitMs;
    return Math.min(this.waitMs, Math.max(Math.floor(held.validMs / 2), 1));
  }

  /** Resolves after `ms`, or at once when the router closes. */
  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const wake = (): void => {
        clearTimeout(timer);
        this.closing.signal.removeEventListener("abort", wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      this.closing.signal.addEventListener("abort", wake);
    });
  }

  private read(body: unknown, sent: number, waitedMs: number): RouteTable | null {
    try {
      return new RouteTable(body as Record<string, unknown>, sent, waitedMs);
    } catch (error) {
      if (!(error instanceof WireError)) throw error;
      this.lastFailure = `an unreadable routing table: ${error.message}`;
      this.log.warn("routes query failed", { group: this.config.group, message: this.lastFailure });
      return null;
    }
  }

  private refused(error: RoutesRefusedError): void {
    this.lastFailure = error.message;
    this.log.warn("routes query refused", { group: this.config.group, status: error.status, code: error.code });
    this.refusal = error;
    this.notify();
  }

  private async refresh(): Promise<void> {
    const sent = performance.now();
    const outcome = await this.ask({});
    if (outcome.kind !== "table" || this.closing.signal.aborted) return;
    const table = this.read(outcome.body, sent, outcome.waitedMs);
    if (table !== null) this.take(table, null);
  }

  /**
   * Keeps `table` if it is newer than the one held, or lower than the
   * epoch asked after (the host's answer when the router's table came
   * from elsewhere); returns the table held then.
   */
  private take(table: RouteTable, askedAfter: number | null): RouteTable {
    this.refusal = null;
    this.lastFailure = "";
    const held = this.held;
    if (held !== null && table.epoch === held.epoch) {
      if (table.readAtMs > held.readAtMs) this.held = held.resent(table.sentAtMs, table.waitedMs);
      return this.held!;
    }
    const lower = askedAfter !== null && table.epoch < askedAfter;
    if (held !== null && table.epoch < held.epoch && !lower) return held;
    this.held = table;
    this.notify();
    try {
      this.emit("change", table);
    } catch (error) {
      this.log.error(`a "change" handler failed`, { error: String(error) });
    }
    return table;
  }
}
