package dev.assignd.client;

import java.lang.System.Logger.Level;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * The member machine: every decision of a member, without I/O. It owns the
 * member id and epoch, when the next request is due and what it carries, the
 * lease, the policy for every failure, drains and leaves, and the order of the
 * events the application is told. It never reads a clock, opens a socket or
 * starts a thread: the caller passes {@code now} (milliseconds from any origin)
 * with each input, sends what {@link #pollRequest} builds, waits until
 * {@link #pollTimeout} and hands out what {@link #pollEvent} yields.
 *
 * <p>It is a port of the Rust client's {@code machine.rs}, rule for rule; the
 * conformance vectors in {@code clients/conformance/vectors} prove it. Not
 * thread-safe: {@link Member} confines one to one thread.
 */
public final class MemberMachine {

    private static final System.Logger LOG = System.getLogger(MemberMachine.class.getName());

    /** The heartbeat interval used until the host names one. */
    public static final long INTERVAL_BEFORE_JOIN_MS = 1_000;
    /** The shortest interval followed, whatever the host says. */
    public static final long INTERVAL_MIN_MS = 10;
    /** The first retry delay after a failure; it doubles up to {@link #RETRY_BACKOFF_MAX_MS}. */
    public static final long RETRY_BACKOFF_MIN_MS = 50;
    /**
     * The longest retry delay (Kafka's {@code retry.backoff.max.ms} default):
     * when a coordinator died, the member reaches the node that takes its shard
     * over within a second of it serving.
     */
    public static final long RETRY_BACKOFF_MAX_MS = 1_000;
    /** How many times a leave is sent when the host does not answer. */
    public static final int LEAVE_ATTEMPTS_MAX = 3;

    /** Replaced by {@link #setEndpoint}. */
    private MachineConfig config;
    private final Tracker tracker = new Tracker();
    /** The loads the application set, and what the host has of them. */
    private final LoadBook loads;
    private final Lease lease = new Lease();
    private final Deque<MemberEvent> events = new ArrayDeque<>();
    /** Empty until joined (and again before a rejoin). */
    private String memberId = "";
    /** The id the next join sends. */
    private String joinId = "";
    private long idsChosen;
    private long epoch = HeartbeatRequest.JOIN_EPOCH;
    private long intervalMs = INTERVAL_BEFORE_JOIN_MS;
    /** Failed requests in a row. */
    private int failures;
    /** The application asked to drain. */
    private boolean drain;
    /** The application asked to leave. */
    private boolean leaveAsked;
    /** The host must hear of a change at once (after the request in flight, if any). */
    private boolean sendNow;
    private List<Lag> lags = List.of();
    /** When the next request is due. */
    private long due;
    /** The send time of the request in flight, or {@code null}. */
    private Long inFlightSent;
    private boolean inFlightLeave;
    /** The request in flight carries an endpoint {@link #setEndpoint} changed: should it fail, the next one carries it again. */
    private boolean inFlightCarriesEndpointChange;
    /** The endpoint and metadata changed since the last request that carried them was sent. */
    private boolean endpointChanged;
    /** A leave under way, or {@code null}. */
    private Leaving leaving;
    private Failure leaveFailure;
    private StopReason stopped;

    /** A leave under way; {@code then == null}: rejoin as a new member after it. */
    private static final class Leaving {
        StopReason then;
        int attempts;

        Leaving(StopReason then) {
            this.then = then;
        }
    }

    /** A member that wants to join at {@code now}. */
    public MemberMachine(MachineConfig config, long now) {
        this.config = config;
        this.due = now;
        this.loads = new LoadBook(config.loadThreshold());
        chooseJoinId();
    }

    /**
     * The wait before the attempt after {@code failures} failed requests in a row
     * (from 1): exponential from 50 ms, at most 1 s and never past the interval.
     */
    public static long retryBackoffMs(int failures, long intervalMs) {
        int doublings = Math.min(Math.max(failures - 1, 0), 16);
        return Math.min(Math.min(RETRY_BACKOFF_MIN_MS << doublings, RETRY_BACKOFF_MAX_MS), intervalMs);
    }

    // ---- outputs ----

    /** The member id, once joined. */
    public Optional<String> memberId() {
        return memberId.isEmpty() ? Optional.empty() : Optional.of(memberId);
    }

    /** The member epoch: a fencing token for the writes made on the tasks held. 0 until joined. */
    public long memberEpoch() {
        return epoch;
    }

    public Assignment assignment() {
        return tracker.assignment();
    }

    public Optional<StopReason> stopped() {
        return Optional.ofNullable(stopped);
    }

    /** The failure that ended the last leave (empty if it was answered, or the member was out already). */
    public Optional<Failure> leaveFailure() {
        return Optional.ofNullable(leaveFailure);
    }

    public boolean inFlight() {
        return inFlightSent != null;
    }

    /** Whether {@link #pollRequest} would build a request at {@code now} (a shell asks its lag source first). */
    public boolean requestDue(long now) {
        return stopped == null && inFlightSent == null && now >= due;
    }

    /** The next event for the application, in order. */
    public Optional<MemberEvent> pollEvent() {
        return Optional.ofNullable(events.pollFirst());
    }

    /**
     * When the machine next wants an input if nothing else happens: the next
     * request (unless one is in flight), or the end of the lease in force while
     * it holds tasks; empty once stopped.
     */
    public OptionalLong pollTimeout() {
        if (stopped != null) {
            return OptionalLong.empty();
        }
        Long next = inFlightSent == null ? due : null;
        Long leaseEnd = tracker.holdsAny() ? lease.end(inFlightSent) : null;
        if (next != null && leaseEnd != null) {
            return OptionalLong.of(Math.min(next, leaseEnd));
        }
        Long either = next != null ? next : leaseEnd;
        return either == null ? OptionalLong.empty() : OptionalLong.of(either);
    }

    /**
     * The end of the lease in force: the unreached lease while the member is on
     * it, else the last answer's; empty before any answer with a lease.
     */
    public OptionalLong leaseUntil() {
        Long end = lease.end(inFlightSent);
        return end == null ? OptionalLong.empty() : OptionalLong.of(end);
    }

    /**
     * The end of the last answer's unreached lease (its request's send time plus
     * {@code unreached_lease_ms}), whether or not it is in force; empty before
     * an answer with one.
     */
    public OptionalLong unreachedLeaseUntil() {
        Long end = lease.unreachedUntil();
        return end == null ? OptionalLong.empty() : OptionalLong.of(end);
    }

    /**
     * Whether the member is on the unreached lease: every heartbeat since the
     * last answer certainly reached no coordinator, and that answer's unreached
     * lease outlasts its plain one.
     */
    public boolean onUnreachedLease() {
        return lease.onUnreached();
    }

    /**
     * Whether the application may process (and commit the output of) {@code task}
     * at {@code now}: it is active here, or being released and not yet
     * acknowledged, and the lease in force has not run out.
     */
    public boolean mayProcess(Task task, long now) {
        OptionalLong until = leaseUntil();
        return tracker.assignment().holds(task) && (until.isEmpty() || now < until.getAsLong());
    }

    // ---- inputs ----

    /**
     * The application's current load of {@code task}, in the group's unit; a task
     * not active here is ignored (a task's load is forgotten once it stops being
     * active). Returns whether the load is one the host accepts (0 to 1e15); an
     * invalid one changes nothing.
     */
    public boolean setLoad(Task task, double load) {
        if (!LoadBook.validLoad(load)) {
            return false;
        }
        if (tracker.isActive(task)) {
            loads.setLoad(task, load);
        }
        return true;
    }

    /** The member's measured utilisation (1.0: fully used; {@code null}: unknown); returns whether the host accepts it. */
    public boolean setUtilisation(Double utilisation) {
        if (!LoadBook.validUtilisation(utilisation)) {
            return false;
        }
        loads.utilisation = utilisation;
        return true;
    }

    /** The load the member can carry ({@code null}: unknown); returns whether the host accepts it. */
    public boolean setLoadCapacity(Double capacity) {
        if (!LoadBook.validLoadCapacity(capacity)) {
            return false;
        }
        loads.loadCapacity = capacity;
        return true;
    }

    /** The application's lag figures; they replace the last report and go in every later heartbeat. */
    public void reportLags(List<Lag> rows) {
        lags = List.copyOf(rows);
    }

    /**
     * The request to send now, if one is due; it is in flight from now until
     * {@link #onAnswer} or {@link #onFailure}.
     */
    public Optional<HeartbeatRequest> pollRequest(long now) {
        if (!requestDue(now)) {
            return Optional.empty();
        }
        inFlightSent = now;
        inFlightLeave = leaving != null;
        inFlightCarriesEndpointChange = !inFlightLeave && endpointChanged;
        sendNow = false;
        if (leaving != null) {
            leaving.attempts++;
            // Once the host has the leave, a dynamic member's tasks go to
            // others at once: nothing is processed from its sending on.
            loseEverythingButId();
            return Optional.of(leaveRequest());
        }
        HeartbeatRequest request = heartbeatRequest(loads.build());
        endpointChanged = false;
        return Optional.of(request);
    }

    /**
     * The application serves at {@code endpoint} now ({@code null}: nowhere), with
     * {@code metadata}: both replace the config's, and the next request (join or
     * heartbeat) carries them, as does every later one until an answer to one
     * that did. No request becomes due: the change goes with the next one.
     */
    public void setEndpoint(String endpoint, Map<String, String> metadata) {
        config = config.withEndpoint(endpoint, metadata);
        endpointChanged = true;
    }

    /** The 200 answer to the request in flight, at {@code now}. */
    public void onAnswer(HeartbeatResponse response, long now) {
        if (inFlightSent == null) {
            throw new IllegalStateException("an answer with no request in flight");
        }
        long sent = inFlightSent;
        inFlightSent = null;
        if (inFlightLeave) {
            finishLeave(null, now);
            return;
        }
        failures = 0;
        lease.answered(response, sent, memberId);
        boolean joined = memberId.isEmpty();
        memberId = response.memberId();
        epoch = response.memberEpoch();
        intervalMs = Math.max(response.heartbeatIntervalMs(), INTERVAL_MIN_MS);
        List<MemberEvent> changes = tracker.onResponse(response);
        loads.answered(response.loadReport());
        forgetInactiveLoads();
        if (joined) {
            events.addLast(new MemberEvent.Joined(response.memberId()));
        }
        boolean drained = changes.stream().anyMatch(MemberEvent.Drained.class::isInstance);
        events.addAll(changes);
        due = sent + intervalMs;
        if (drained && leaving == null) {
            beginLeave(StopReason.DRAINED, now);
        }
        afterHeartbeat(now);
    }

    /** The request in flight failed, as {@code failure} says, at {@code now}. */
    public void onFailure(Failure failure, long now) {
        if (inFlightSent == null) {
            throw new IllegalStateException("a failure with no request in flight");
        }
        long sent = inFlightSent;
        inFlightSent = null;
        // The host may not have it: the next request carries it again.
        endpointChanged |= inFlightCarriesEndpointChange;
        if (inFlightLeave) {
            leaveFailed(failure, now);
        } else {
            loads.failed();
            lease.failed(failure, tracker.isReleasing(), memberId);
            FailurePolicy.apply(this, failure, sent, now);
            afterHeartbeat(now);
        }
        settleLeave(now);
    }

    /** After a heartbeat's outcome: a leave, an ack, a drain or a loss that came while it was in flight goes at once. */
    private void afterHeartbeat(long now) {
        if (leaving != null || sendNow) {
            due = Math.min(due, now);
        }
        settleLeave(now);
    }

    /** The host must hear of a change at once (after the request in flight, if any). */
    private void hurry(long now) {
        due = Math.min(due, now);
        sendNow = true;
    }

    /**
     * The application stopped the tasks of the {@code revoked} event {@code ack}:
     * they are released by a heartbeat sent at once. An unknown ack (from before
     * a reset, or acknowledged twice) changes nothing.
     */
    public void ack(long ack, long now) {
        List<MemberEvent> changes = tracker.onAck(ack);
        if (changes != null) {
            events.addAll(changes);
            hurry(now);
        }
    }

    /** The application asks the host to drain this member. */
    public void drain(long now) {
        if (!drain && stopped == null) {
            drain = true;
            hurry(now);
        }
    }

    /**
     * The application leaves the group: a leave is sent next (once the request in
     * flight, if any, is done), then the machine stops ({@code left}).
     */
    public void leave(long now) {
        if (stopped != null) {
            return;
        }
        leaveAsked = true;
        if (leaving != null) {
            leaving.then = StopReason.LEFT;
        } else {
            beginLeave(StopReason.LEFT, now);
        }
        settleLeave(now);
    }

    /**
     * Time passed: when the lease in force ran out with no newer answer, every
     * held task is lost (the host may have given them away); the id is kept,
     * since the host may still count the member, and a heartbeat is due at once.
     */
    public void tick(long now) {
        if (stopped != null || !tracker.holdsAny()) {
            return;
        }
        Long end = lease.end(inFlightSent);
        if (end == null || now < end) {
            return;
        }
        Assignment held = tracker.assignment();
        LOG.log(Level.WARNING, "member {0}: {1} ({2} active, {3} revoking, {4} ms late): stopping every task",
                memberId,
                lease.onUnreached()
                        ? "the unreached lease ran out with no heartbeat reaching a coordinator of the group"
                        : "the lease of the last answer ran out without a newer answer from the host",
                String.valueOf(held.active().size()), String.valueOf(held.revoking().size()), String.valueOf(now - end));
        loseEverythingButId();
        hurry(now);
    }

    // ---- what the failure policy and the leave use ----

    MachineConfig config() {
        return config;
    }

    boolean joined() {
        return !memberId.isEmpty();
    }

    String currentMemberId() {
        return memberId;
    }

    /** Whether the member is on its way out: asked to drain or leave, or draining. */
    boolean leavingOrDraining() {
        return drain || leaveAsked || tracker.assignment().draining();
    }

    long intervalMs() {
        return intervalMs;
    }

    long due() {
        return due;
    }

    void setDue(long due) {
        this.due = due;
    }

    void tell(MemberEvent event) {
        events.addLast(event);
    }

    /** The next attempt after a failure, keeping the member id and epoch. */
    void retryLater(long sent) {
        failures = failures == Integer.MAX_VALUE ? failures : failures + 1;
        due = sent + retryBackoffMs(failures, intervalMs);
    }

    void beginLeave(StopReason then, long now) {
        leaving = new Leaving(then);
        leaveFailure = null;
        due = now;
    }

    void stop(StopReason reason) {
        leaving = null;
        if (stopped == null) {
            stopped = leaveAsked ? StopReason.LEFT : reason;
        }
    }

    /** Tells the application every held task is lost, and forgets the member id. */
    void loseEverything() {
        loseEverythingButId();
        forgetMemberId();
    }

    void loseEverythingButId() {
        List<Task> lost = tracker.reset();
        forgetInactiveLoads();
        if (!lost.isEmpty()) {
            events.addLast(new MemberEvent.Lost(lost));
        }
    }

    /** Out of the group: the next join is a new member, with a new id. */
    void forgetMemberId() {
        memberId = "";
        chooseJoinId();
        epoch = HeartbeatRequest.JOIN_EPOCH;
        // A new member's host has none of its loads, and asks for them.
        loads.reset();
    }

    private void forgetInactiveLoads() {
        loads.retainActive(tracker::isActive);
    }

    void chooseJoinId() {
        idsChosen++;
        joinId = config.idPrefix() + "-" + idsChosen;
    }

    // ---- private ----

    /**
     * A heartbeat carries the endpoint and metadata explicitly ({@code ""} for
     * none, {@code {}} for empty) after a change until an answer to a request
     * that carried them; else a join carries those set; else neither (the host
     * keeps what it has).
     */
    private HeartbeatRequest heartbeatRequest(LoadBook.Fields load) {
        boolean joining = memberId.isEmpty();
        String endpoint = null;
        Map<String, String> metadata = null;
        if (endpointChanged) {
            endpoint = config.endpoint() == null ? "" : config.endpoint();
            metadata = config.metadata();
        } else if (joining) {
            endpoint = config.endpoint();
            metadata = config.metadata().isEmpty() ? null : config.metadata();
        }
        return new HeartbeatRequest(
                joining ? joinId : memberId,
                config.memberName(),
                epoch,
                joining ? config.topics() : null,
                config.rack(),
                config.capacity(),
                tracker.owned(),
                lags,
                drain,
                true,
                endpoint,
                metadata,
                load.loads(),
                load.utilisation(),
                load.loadCapacity());
    }

    private HeartbeatRequest leaveRequest() {
        return new HeartbeatRequest(memberId, config.memberName(), HeartbeatRequest.LEAVE_EPOCH, null,
                config.rack(), config.capacity(), List.of(), List.of(), drain, true);
    }

    /** Ends a leave that cannot be sent: nothing to leave, nothing in flight. */
    private void settleLeave(long now) {
        if (leaving != null && inFlightSent == null && memberId.isEmpty()) {
            finishLeave(null, now);
        }
    }

    private void leaveFailed(Failure failure, long now) {
        int attempts = leaving == null ? LEAVE_ATTEMPTS_MAX : leaving.attempts;
        String code = failure.code();
        boolean outAlready = ErrorCodes.FENCED.equals(code) || ErrorCodes.REPLACED.equals(code)
                || ErrorCodes.UNKNOWN_MEMBER.equals(code) || ErrorCodes.UNKNOWN_GROUP.equals(code);
        if (outAlready) {
            finishLeave(null, now);
        } else if (!failure.isTransient() || attempts >= LEAVE_ATTEMPTS_MAX) {
            finishLeave(failure, now);
        } else {
            due = now + (RETRY_BACKOFF_MIN_MS << attempts);
        }
    }

    private void finishLeave(Failure failure, long now) {
        StopReason then = leaving == null ? null : leaving.then;
        leaving = null;
        if (failure != null) {
            LOG.log(Level.WARNING, "member {0}: the leave failed: {1} {2}", memberId, failure.kind(), failure.message());
        }
        leaveFailure = failure;
        forgetMemberId();
        if (then != null) {
            stop(then);
        } else {
            due = now;
        }
    }
}
