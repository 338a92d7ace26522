/**
 * One routes query for the router, over node's `fetch`: `GET` within a
 * timeout (and ended at once when the router closes), `307`/`308` followed
 * by hand so that the token goes with them (fetch drops `Authorization` on
 * a redirect to another origin), and the outcome sorted into what the
 * router acts on: a table body, a refusal (the host's
 * `{"error": {"code", "message"}}`), or a node that cannot answer now (no
 * connection, a 5xx, a 503 with `Retry-After`).
 */

import { decodeError } from "./wire";

/** The most redirects one query follows. */
export const REDIRECTS_MAX = 5;
/** The longest `Retry-After` taken from the host, in seconds. */
export const RETRY_AFTER_S_MAX = 60;
/** The longest error body kept in a message. */
const ERROR_BODY_LEN_MAX = 512;
/** The longest wait taken from `Assignd-Routes-Waited-Ms`: the host never holds a query longer than its longest wait. */
export const WAITED_MS_MAX = 20_000;

export type Outcome =
  /** A 200 answer: the table's JSON, and how long the query waited at the host before it was read (0 when the answer does not say). */
  | { readonly kind: "table"; readonly body: unknown; readonly waitedMs: number }
  /** The host refused the query (401, 403, 404, another 4xx). */
  | { readonly kind: "refused"; readonly status: number; readonly code: string; readonly message: string }
  /** The node did not answer usefully now: ask the next one. */
  | { readonly kind: "unavailable"; readonly message: string; readonly retryAfterMs: number | null };

/** The routes URL of `group` at the host whose base URL is `base`; throws a `TypeError` for a base that is not http(s). */
export function routesUrl(base: string, group: string, query: Record<string, number>): URL {
  const url = new URL(base);
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new TypeError(`url ${base} is not an http:// base URL`);
  url.pathname = `${url.pathname.replace(/\/+$/, "")}/v1/groups/${encodeURIComponent(group)}/routes`;
  url.search = new URLSearchParams(Object.entries(query).map(([k, v]): [string, string] => [k, String(v)])).toString();
  return url;
}

function retryAfterMs(value: string | null): number | null {
  if (value === null || !/^\s*\d+\s*$/.test(value)) return null;
  return Math.min(Number(value.trim()), RETRY_AFTER_S_MAX) * 1000;
}

function waitedMs(value: string | null): number {
  if (value === null || !/^\s*\d+\s*$/.test(value)) return 0;
  return Math.min(Number(value.trim()), WAITED_MS_MAX);
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = (error as { cause?: unknown }).cause;
  if (cause instanceof Error) {
    const code = (cause as NodeJS.ErrnoException).code;
    return `${error.message}: ${code && !cause.message.includes(code) ? `${code} ` : ""}${cause.message}`;
  }
  return error.message;
}

/** What an answer that is not a redirect means to the router. */
export function classify(status: number, retryAfter: string | null, text: string, waited: string | null = null): Outcome {
  if (status === 200) {
    try {
      return { kind: "table", body: JSON.parse(text), waitedMs: waitedMs(waited) };
    } catch (error) {
      return { kind: "unavailable", message: `an unreadable routing table: ${describe(error)}`, retryAfterMs: null };
    }
  }
  const detail = decodeError(text);
  const message = detail?.message ?? text.slice(0, ERROR_BODY_LEN_MAX);
  if (status >= 400 && status < 500) return { kind: "refused", status, code: detail?.code ?? `http_${status}`, message };
  return { kind: "unavailable", message: `HTTP ${status}: ${message}`, retryAfterMs: retryAfterMs(retryAfter) };
}

/** `GET url` with `headers`, following redirects, within `timeoutMs`; `signal` ends it at once. */
export async function getRoutes(
  url: URL,
  headers: Record<string, string>,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<Outcome> {
  const controller = new AbortController();
  const abort = (): void => controller.abort();
  const timer = setTimeout(abort, timeoutMs);
  signal.addEventListener("abort", abort);
  try {
    for (let redirects = 0; redirects <= REDIRECTS_MAX; redirects++) {
      const answer = await fetch(url, { headers, redirect: "manual", signal: controller.signal });
      const text = await answer.text();
      const location = answer.headers.get("location");
      if ((answer.status === 307 || answer.status === 308) && location) {
        url = new URL(location, url);
        continue;
      }
      const waited = answer.headers.get("assignd-routes-waited-ms");
      return classify(answer.status, answer.headers.get("retry-after"), text, waited);
    }
    return { kind: "unavailable", message: `more than ${REDIRECTS_MAX} redirects, the last to ${url.href}`, retryAfterMs: null };
  } catch (error) {
    const why = controller.signal.aborted && !signal.aborted ? `no answer within ${timeoutMs} ms` : describe(error);
    return { kind: "unavailable", message: `${url.href}: ${why}`, retryAfterMs: null };
  } finally {
    clearTimeout(timer);
    signal.removeEventListener("abort", abort);
  }
}
