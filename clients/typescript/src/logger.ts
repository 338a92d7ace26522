/**
 * Structured logs through a pluggable logger. The default writes JSON
 * lines to stderr, warnings and errors only: a member library must not
 * fill an application's output, but a lease running out or a failed leave
 * must be seen.
 */

export type LogLevel = "debug" | "info" | "warn" | "error";

/** Extra structured fields of a log line. */
export type LogFields = Record<string, unknown>;

export interface Logger {
  debug(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
}

const RANK: Record<LogLevel, number> = { debug: 0, info: 1, warn: 2, error: 3 };

/** A logger that writes one JSON object a line, at `level` and above. */
export function jsonLogger(
  level: LogLevel = "warn",
  write: (line: string) => void = (line) => process.stderr.write(line),
): Logger {
  const at =
    (lineLevel: LogLevel) =>
    (message: string, fields: LogFields = {}): void => {
      if (RANK[lineLevel] < RANK[level]) return;
      const line = { ts: new Date().toISOString(), level: lineLevel, target: "assignd", message, ...fields };
      write(JSON.stringify(line) + "\n");
    };
  return { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}

/** A logger that drops everything. */
export const silentLogger: Logger = {
  debug() {},
  info() {},
  warn() {},
  error() {},
};
