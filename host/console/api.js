// The console's one way to the host: every API call carries the token the
// operator logged in with, and every failure becomes an ApiError with the
// host's error message (the body `{"error": {"code", "message"}}`), so
// the page can show it. It also keeps the session (the token and its
// access, in sessionStorage: gone when the tab closes) and the host's clock.

const TOKEN_KEY = "assignd.token";
const ACCESS_KEY = "assignd.access";

/** A failed call: the HTTP status, the host's error code and message. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export const session = {
  get token() {
    return sessionStorage.getItem(TOKEN_KEY);
  },
  /** "admin" or "read_only". */
  get access() {
    return sessionStorage.getItem(ACCESS_KEY);
  },
  get readOnly() {
    return this.access !== "admin";
  },
  save(token, access) {
    sessionStorage.setItem(TOKEN_KEY, token);
    sessionStorage.setItem(ACCESS_KEY, access);
  },
  clear() {
    sessionStorage.removeItem(TOKEN_KEY);
    sessionStorage.removeItem(ACCESS_KEY);
  },
};

/**
 * Calls `path` on this host with the session's token (or `token`): the
 * parsed JSON answer, the text of a text answer, or an ApiError.
 */
export async function api(path, { method = "GET", body, token } = {}) {
  const headers = { accept: "application/json" };
  const bearer = token ?? session.token;
  if (bearer) headers.authorization = `Bearer ${bearer}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
    });
  } catch (e) {
    throw new ApiError(0, "unreachable", `the host does not answer (${e.message})`);
  }
  const type = response.headers.get("content-type") ?? "";
  const text = await response.text();
  if (!response.ok) {
    let code = `http_${response.status}`;
    let message = `${method} ${path}: HTTP ${response.status}`;
    try {
      const error = JSON.parse(text).error;
      if (error?.message) {
        code = error.code;
        message = error.message;
      }
    } catch {
      // Not the error body (a proxy's page): the status says it.
    }
    throw new ApiError(response.status, code, message);
  }
  if (text === "") return null;
  return type.startsWith("application/json") ? JSON.parse(text) : text;
}

/** The path of group `name`'s view. */
export function groupPath(name) {
  return `/v1/groups/${encodeURIComponent(name)}`;
}

// The host counts `at_ms` from its own start; `GET /v1/shards` tells its
// `now_ms`, from which the page estimates it between two reads.
let clockOffsetMs = null;

/** Reads the host's shards, and its clock with them. */
export async function shards() {
  const list = await api("/v1/shards");
  clockOffsetMs = list.now_ms - Date.now();
  return list;
}

/** The host's clock now (ms since it started), once known; else null. */
export function hostNow() {
  return clockOffsetMs === null ? null : Date.now() + clockOffsetMs;
}

/** How long ago host time `atMs` was, as text ("12 s ago"). */
export function ago(atMs) {
  const now = hostNow();
  if (now === null || atMs === null || atMs === undefined) return "—";
  const seconds = Math.max(0, Math.round((now - atMs) / 1000));
  if (seconds < 120) return `${seconds} s ago`;
  if (seconds < 7200) return `${Math.round(seconds / 60)} min ago`;
  return `${Math.round(seconds / 3600)} h ago`;
}
