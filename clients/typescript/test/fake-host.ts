/** A fake HTTP host for the transport's and the member's tests. */

import * as http from "node:http";
import { AddressInfo } from "node:net";

export interface Seen {
  readonly url: string;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: any;
}

export type Handler = (seen: Seen, response: http.ServerResponse, request: http.IncomingMessage) => void;

export class FakeHost {
  readonly seen: Seen[] = [];
  connections = 0;
  private constructor(
    private readonly server: http.Server,
    readonly base: string,
  ) {}

  static async start(handler: Handler): Promise<FakeHost> {
    let host: FakeHost | undefined;
    const server = http.createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (c: Buffer) => chunks.push(c));
      request.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        const seen = { url: request.url ?? "", headers: request.headers, body: text ? JSON.parse(text) : null };
        host?.seen.push(seen);
        handler(seen, response, request);
      });
    });
    server.on("connection", () => host && (host.connections += 1));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    host = new FakeHost(server, `http://127.0.0.1:${port}`);
    return host;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** A base URL on which nothing listens (a port just freed). */
export async function refusingBase(): Promise<string> {
  const host = await FakeHost.start(() => {});
  await host.close();
  return host.base;
}

export function json(response: http.ServerResponse, status: number, body: unknown, headers: http.OutgoingHttpHeaders = {}): void {
  response.writeHead(status, { "content-type": "application/json", ...headers });
  response.end(JSON.stringify(body));
}

export function refusal(response: http.ServerResponse, status: number, code: string, headers: http.OutgoingHttpHeaders = {}): void {
  json(response, status, { error: { code, message: `refused: ${code}` } }, headers);
}

/** A 200 answer for member `memberId` at `epoch` holding `active` (ranges or pairs). */
export function answer(memberId: string, epoch: number, active: unknown[] = [], extra: Record<string, unknown> = {}): unknown {
  return {
    member_id: memberId,
    member_epoch: epoch,
    heartbeat_interval_ms: 100,
    active,
    revoking: [],
    learner: [],
    standby: [],
    draining: false,
    drained: false,
    lease_ms: 3000,
    unreached_lease_ms: 3000,
    unreached_flight_ms: 2000,
    ...extra,
  };
}
