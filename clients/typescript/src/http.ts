/**
 * One HTTP POST over node's `http`/`https`, reporting what a heartbeat's
 * classification needs and `fetch` hides: whether the connection was ever
 * made (a refused or failed connect never sent the request), whether the
 * socket was a reused kept-alive one, and the answer exactly as it came
 * (redirects are never followed here).
 */

import * as http from "node:http";
import * as https from "node:https";

export interface Answer {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
}

/** Why no answer came. */
export type NoAnswer =
  /** The connection was never made: the request did not go out. */
  | { readonly kind: "not_connected"; readonly message: string }
  /** The deadline passed once connected. */
  | { readonly kind: "timeout"; readonly message: string }
  /** The connection failed after it was made: the request may have gone out. */
  | { readonly kind: "lost"; readonly message: string; readonly reusedSocket: boolean }
  /** The answer began but did not finish (failed or timed out while its body came). */
  | { readonly kind: "cut_off"; readonly message: string };

export type PostResult = { readonly ok: true; readonly answer: Answer } | { readonly ok: false; readonly error: NoAnswer };

/** The connections of one member: kept alive, closed by the client when idle. */
export interface Agents {
  readonly http: http.Agent;
  readonly https: https.Agent;
}

/**
 * Idle connections are closed before the host's idle timeout (10 s by
 * default), so a request never goes out on a connection the host is closing.
 */
export const CONNECTION_IDLE_MAX_MS = 5_000;

export function keepAliveAgents(): Agents {
  const options = { keepAlive: true, timeout: CONNECTION_IDLE_MAX_MS, maxSockets: 4 };
  return { http: new http.Agent(options), https: new https.Agent(options) };
}

function describe(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code && !error.message.includes(code) ? `${code}: ${error.message}` : error.message;
  }
  return String(error);
}

/** POSTs `body` to `url`, giving up after `timeoutMs`. */
export function post(
  url: URL,
  body: string,
  headers: Record<string, string>,
  timeoutMs: number,
  agents: Agents,
): Promise<PostResult> {
  return new Promise((resolve) => {
    let settled = false;
    let connected = false;
    let responded = false;
    const finish = (result: PostResult): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(result);
    };
    const cutOff = (message: string): void => finish({ ok: false, error: { kind: "cut_off", message } });
    const secure = url.protocol === "https:";
    const request = (secure ? https : http).request(url, {
      method: "POST",
      agent: secure ? agents.https : agents.http,
      headers: { ...headers, "content-type": "application/json", "content-length": Buffer.byteLength(body) },
    });
    const timer = setTimeout(() => {
      const message = `no answer within ${timeoutMs} ms`;
      const kind = responded ? "cut_off" : connected ? "timeout" : "not_connected";
      finish({ ok: false, error: { kind, message } });
      request.destroy();
    }, timeoutMs);
    request.on("socket", (socket) => {
      // A kept-alive socket is connected already.
      if (!socket.connecting) connected = true;
      else socket.once(secure ? "secureConnect" : "connect", () => (connected = true));
    });
    request.on("error", (error) => {
      const message = describe(error);
      if (responded) return cutOff(message);
      finish({
        ok: false,
        error: connected ? { kind: "lost", message, reusedSocket: request.reusedSocket } : { kind: "not_connected", message },
      });
    });
    request.on("response", (response) => {
      responded = true;
      const chunks: Buffer[] = [];
      response.on("data", (chunk: Buffer) => chunks.push(chunk));
      response.on("error", (error) => cutOff(describe(error)));
      response.on("aborted", () => cutOff("the answer was cut off"));
      response.on("end", () => {
        if (response.complete) {
          finish({
            ok: true,
            answer: { status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(chunks).toString("utf8") },
          });
        } else {
          cutOff("the answer was cut off");
        }
      });
    });
    request.end(body);
  });
}
