/** The real `assignd` binary (ASSIGND_BIN) for the smoke tests: started on a free port with an admin token. */

import { ChildProcess, spawn } from "node:child_process";

export const BIN = process.env.ASSIGND_BIN;
/** The host refuses admin tokens shorter than 16 bytes. */
export const ADMIN_TOKEN = "t0k-t0k-t0k-t0k-t0k";

/** Starts `assignd serve` on a free loopback port; resolves with its base URL once it listens. */
export async function serve(dataDir: string): Promise<{ child: ChildProcess; base: string }> {
  const child = spawn(BIN!, ["serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir], {
    env: { ...process.env, ASSIGND_ADMIN_TOKEN: ADMIN_TOKEN },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const base = await new Promise<string>((resolve, reject) => {
    let text = "";
    child.stdout!.on("data", (chunk: Buffer) => {
      text += chunk.toString("utf8");
      const match = /listening on (http:\/\/\S+)/.exec(text.split("\n")[0] ?? "");
      if (match) resolve(match[1]);
    });
    child.once("exit", (code) => reject(new Error(`assignd exited (${code}) before listening`)));
  });
  child.stdout!.resume();
  return { child, base };
}

export async function until(what: string, check: () => boolean, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
