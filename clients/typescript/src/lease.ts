/**
 * The lease of the last answer, counted from when its request was sent,
 * and the longer unreached lease that holds while every request since
 * certainly reached no coordinator of the group (its node died, and no
 * other serves the group yet): the host takes tasks early only through a
 * heartbeat it got.
 */

import { Failure } from "./failure";
import { HeartbeatResponse } from "./wire";

/** `Option::min` as Rust orders it: nothing comes first. */
function optMin(a: number | null, b: number | null): number | null {
  return a === null || b === null ? null : Math.min(a, b);
}

/** `Option::max` as Rust orders it: nothing comes first. */
function optMax(a: number | null, b: number | null): number | null {
  if (a === null) return b;
  if (b === null) return a;
  return Math.max(a, b);
}

export class Lease {
  until: number | null = null;
  private unreachedUntil: number | null = null;
  /**
   * The last answer's `unreached_flight_ms`: while a request is in flight
   * the unreached lease counts only until its send time plus this. Null
   * from a host before it: no unreached lease while a request is in flight.
   */
  private flightMs: number | null = null;
  /** A request since the last answer may have reached the coordinator. */
  private reachedSinceAnswer = false;
  /** Every request since the last answer certainly reached no coordinator. */
  onUnreached = false;

  /** Takes the lease of `response`, whose request was sent at `sent`. */
  take(response: HeartbeatResponse, sent: number): void {
    this.until = response.leaseMs === null ? null : sent + response.leaseMs;
    this.unreachedUntil = response.unreachedLeaseMs === null ? null : sent + response.unreachedLeaseMs;
    this.flightMs = response.unreachedFlightMs;
    this.reachedSinceAnswer = false;
    this.onUnreached = false;
  }

  /**
   * Judges which lease holds after a failed heartbeat; returns whether it
   * changed. `releasing`: a task is revoked and not acknowledged, whose
   * fence may come before the unreached lease ends.
   */
  judge(failure: Failure, releasing: boolean): boolean {
    const unreached = failure.kind === "unreached" && !this.reachedSinceAnswer;
    this.reachedSinceAnswer ||= !unreached;
    const extends_ =
      unreached &&
      !releasing &&
      this.flightMs !== null &&
      this.until !== null &&
      this.unreachedUntil !== null &&
      this.unreachedUntil > this.until;
    if (extends_ === this.onUnreached) return false;
    this.onUnreached = extends_;
    return true;
  }

  /**
   * The end of the lease in force. `inFlightSent`: the send time of the
   * request in flight, if one is; on the unreached lease it may reach the
   * coordinator, which then keeps the tasks only the flight bound longer.
   */
  end(inFlightSent: number | null): number | null {
    if (!this.onUnreached) return this.until;
    let bound: number | null;
    if (inFlightSent === null) bound = this.unreachedUntil;
    else if (this.flightMs === null) bound = this.until;
    else bound = inFlightSent + this.flightMs;
    return optMax(this.until, optMin(this.unreachedUntil, bound));
  }

  /** For logs. */
  describe(): { lease_until_ms: number | null; unreached_until_ms: number | null } {
    return { lease_until_ms: this.until, unreached_until_ms: this.unreachedUntil };
  }
}
