/**
 * What became of a request that got no 200 answer, as the transport
 * classifies it and the machine decides on it.
 */

export type Failure =
  /**
   * No coordinator of the group can have handled it: every attempt was
   * refused a connection, redirected, or answered 503 `shard_unavailable`.
   */
  | { readonly kind: "unreached" }
  /** No answer (a timeout, a connection lost after sending): it may have been handled. */
  | { readonly kind: "no_answer" }
  /** The host refused it with an error code (a 4xx, or `not_coordinator`). */
  | { readonly kind: "refused"; readonly status: number; readonly code: string; readonly retryAfterMs: number | null }
  /** The host failed (a 5xx): it may have been handled. */
  | { readonly kind: "server"; readonly status: number; readonly retryAfterMs: number | null }
  /** An answer the client cannot read. */
  | { readonly kind: "unreadable" };

/** The host's error codes the machine acts on. */
export const Codes = {
  UNKNOWN_GROUP: "unknown_group",
  UNKNOWN_MEMBER: "unknown_member",
  /** Removed (left, expired, or held tasks too long): rejoining is right. */
  FENCED: "fenced",
  /** Another process took the member's name: rejoining would fence it in turn. */
  REPLACED: "replaced",
  STALE_EPOCH: "stale_epoch",
} as const;

export function failureCode(failure: Failure): string | null {
  return failure.kind === "refused" ? failure.code : null;
}

export function retryAfterMs(failure: Failure): number | null {
  return failure.kind === "refused" || failure.kind === "server" ? failure.retryAfterMs : null;
}

/** Whether the same request may succeed later. */
export function isTransient(failure: Failure): boolean {
  return failure.kind === "unreached" || failure.kind === "no_answer" || failure.kind === "server";
}

/** A failed heartbeat as the application sees it: the failure and what happened. */
export class HeartbeatError extends Error {
  override name = "HeartbeatError";

  constructor(
    readonly failure: Failure,
    message: string,
  ) {
    super(message);
  }
}
