package dev.assignd.client;

import java.security.SecureRandom;
import java.time.Duration;
import java.util.HexFormat;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;

/**
 * A running member of a group: it joins at once, heartbeats at the host's
 * interval on a thread of its own, and tells a {@link RebalanceListener} which
 * tasks to process.
 *
 * <pre>{@code
 * try (Member member = Member.start(MemberConfig.of(url, "billing", List.of("orders")), listener)) {
 *     ...
 *     if (member.mayProcess(task)) { commit(output, member.memberEpoch()); }
 * }   // close() leaves the group
 * }</pre>
 *
 * <p>Every method is thread-safe. The member stops for good when it leaves,
 * its drain finishes, another process takes its name, or the host fences or
 * removes it while it leaves or drains; {@link #closed()} says which.
 */
public final class Member implements AutoCloseable {

    private static final SecureRandom RANDOM = new SecureRandom();

    private final MemberLoop loop;
    private final Thread thread;

    private Member(MemberLoop loop, String name) {
        this.loop = loop;
        this.thread = new Thread(loop, "assignd-member-" + name);
        this.thread.setDaemon(true);
    }

    /** Starts a member that reports no lags (it keeps no state). */
    public static Member start(MemberConfig config, RebalanceListener listener) {
        return start(config, listener, LagSource.NONE);
    }

    /**
     * Starts a member: it joins at once.
     *
     * @param lagSource called before each heartbeat for the lags of the tasks whose state it keeps
     * @throws IllegalArgumentException if the config cannot work (see {@link MemberConfig#check()})
     */
    public static Member start(MemberConfig config, RebalanceListener listener, LagSource lagSource) {
        config.check();
        Transport transport = new Transport(config.url(), config.group(), config.memberToken(),
                config.requestTimeout());
        MachineConfig machineConfig = new MachineConfig(config.memberName(), config.topics(), config.rack(),
                config.capacity(), chooseIdPrefix(), config.endpoint(), config.metadata(), config.loadThreshold());
        String name = config.group() + (config.memberName() == null ? "" : "-" + config.memberName());
        MemberMachine machine = new MemberMachine(machineConfig, 0);
        machine.setLoadCapacity(config.loadCapacity());
        MemberLoop loop = new MemberLoop(machine, transport, lagSource, listener, name);
        Member member = new Member(loop, name);
        member.thread.start();
        return member;
    }

    /** {@code c-} and 32 random hex digits: the prefix of the member ids this member chooses. */
    private static String chooseIdPrefix() {
        byte[] bytes = new byte[16];
        RANDOM.nextBytes(bytes);
        return "c-" + HexFormat.of().formatHex(bytes);
    }

    /**
     * Whether the application may process (and commit the output of) {@code task}
     * now: it is active here (or being released, not yet acknowledged) and the
     * member's lease has not run out. The host gives nobody else the task before
     * the lease ends, however long this process is stalled, so checking this
     * before each commit keeps a stalled process (a long GC pause, a suspended
     * VM) from writing after its task went elsewhere.
     *
     * <p>False from the sending of a leave on, and once the member has stopped:
     * the host may hand the tasks on as soon as it gets the leave, so the
     * machine gives up every task (the listener hears {@code onTasksLost}) as
     * it builds the leave, and the member publishes that before sending it.
     * (After some stops the machine keeps the tasks it last held, under the
     * lease.)
     */
    public boolean mayProcess(Task task) {
        MemberLoop.Status status = loop.status();
        return status.stopped() == null
                && status.assignment().holds(task)
                && (status.leaseUntilMs() == null || loop.nowMs() < status.leaseUntilMs());
    }

    /** The member id, once joined. */
    public Optional<String> memberId() {
        return Optional.ofNullable(loop.status().memberId());
    }

    /**
     * The member epoch, a fencing token: it only grows while the member keeps its
     * tasks, and a new owner of a task has a higher epoch than the old one had
     * when it held the task. Store it with each write and refuse writes that
     * carry a lower one. 0 until joined.
     */
    public long memberEpoch() {
        return loop.status().memberEpoch();
    }

    /** The assignment as the listener has been (or is about to be) told it. */
    public Assignment assignment() {
        return loop.status().assignment();
    }

    /** How long the lease in force still runs, if the host sent one (zero once it ran out). */
    public Optional<Duration> leaseRemaining() {
        Long until = loop.status().leaseUntilMs();
        return until == null ? Optional.empty() : Optional.of(Duration.ofMillis(Math.max(0, until - loop.nowMs())));
    }

    /**
     * Publishes where this member serves now ({@code null}: nowhere) and its
     * metadata, replacing both: the next heartbeat carries them, and every later
     * one until the host has them.
     *
     * @throws IllegalArgumentException if they are past the host's limits (nothing changes)
     */
    public void setEndpoint(String endpoint, Map<String, String> metadata) {
        MemberConfig.checkEndpoint(endpoint, metadata);
        loop.setEndpoint(endpoint, Map.copyOf(metadata));
    }

    /**
     * Sets the current load of active tasks, in the group's load unit (records/s,
     * bytes/s, ...: whatever the group's {@code load_unit} names). They go with a
     * later heartbeat once the host asks for loads: all of them after a join or a
     * coordinator change, else those that moved by more than the config's
     * {@code loadThreshold}. A task not active here is ignored, and a task's load
     * is forgotten once it stops being active. No heartbeat is sent for it.
     *
     * @throws IllegalArgumentException for a load that is not a finite number from 0
     *                                  to 1e15 (nothing changes)
     */
    public void reportLoad(Map<Task, Double> loads) {
        reportLoad(loads, null, null);
    }

    /**
     * {@link #reportLoad(Map)}, with the member's measured {@code utilisation} (1.0:
     * fully used, at most 10) and the {@code loadCapacity} it can carry (above 0, at
     * most 1e15); {@code null} leaves either as it is.
     *
     * @throws IllegalArgumentException for a value the host would refuse (nothing changes)
     */
    public void reportLoad(Map<Task, Double> loads, Double utilisation, Double loadCapacity) {
        loads.forEach((task, load) -> {
            if (load == null || !LoadBook.validLoad(load)) {
                throw new IllegalArgumentException("the load " + load + " of " + task
                        + " is not a finite number from 0 to 1e15");
            }
        });
        if (!LoadBook.validUtilisation(utilisation)) {
            throw new IllegalArgumentException("a utilisation must be a finite number from 0 to 10, not " + utilisation);
        }
        if (!LoadBook.validLoadCapacity(loadCapacity)) {
            throw new IllegalArgumentException("a load capacity must be above 0 and at most 1e15, not " + loadCapacity);
        }
        loop.reportLoad(Map.copyOf(loads), utilisation, loadCapacity);
    }

    /**
     * Asks the host to drain this member: its tasks move to others as they warm
     * up; then the listener hears {@code onDrained}, the member leaves, and
     * {@link #closed()} completes with {@link StopReason#DRAINED}.
     */
    public void drain() {
        loop.drain();
    }

    /**
     * Leaves the group (once a heartbeat in flight is done), and stops. Stop
     * processing first: a dynamic member's tasks go to others at once (a static
     * member's wait for its registration timeout).
     *
     * @return {@link #closed()}
     */
    public CompletableFuture<StopReason> leave() {
        loop.leave();
        return loop.closed();
    }

    /**
     * Completes with why the member stopped, after the listener has heard every
     * event; completes exceptionally with a {@code CancellationException} if it
     * was {@linkplain #abort() aborted}.
     */
    public CompletableFuture<StopReason> closed() {
        return loop.closed();
    }

    /** Stops at once without leaving, as a crash would: the host notices at the session timeout. */
    public void abort() {
        loop.abort();
    }

    /**
     * Leaves and waits until the member stopped. Called from the listener's own
     * thread, it asks to leave and returns at once (waiting there would wait for
     * itself).
     */
    @Override
    public void close() {
        CompletableFuture<StopReason> closed = leave();
        if (loop.isListenerThread()) {
            return;
        }
        try {
            closed.get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (ExecutionException | java.util.concurrent.CancellationException e) {
            // Aborted or failed: it has stopped all the same.
        }
    }
}
