package dev.assignd.client.examples;

import dev.assignd.client.Failure;
import dev.assignd.client.Member;
import dev.assignd.client.MemberConfig;
import dev.assignd.client.RebalanceListener;
import dev.assignd.client.StopReason;
import dev.assignd.client.Task;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.Collection;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * An example worker with simulated stateful tasks, the same in every assignd
 * client (see {@code clients/README.md}): it prints one JSON line per event on
 * stdout, processes its active tasks only while {@link Member#mayProcess}
 * allows, and drains on SIGTERM or SIGINT (a second signal leaves at once).
 */
public final class Worker implements RebalanceListener {

    /** How often the simulation advances. */
    private static final long TICK_MS = 100;

    private final SimulatedTasks sim;
    private final JsonLines out;

    private Worker(SimulatedTasks sim, JsonLines out) {
        this.sim = sim;
        this.out = out;
    }

    public static void main(String[] argv) throws IOException, InterruptedException {
        WorkerArgs args;
        try {
            args = WorkerArgs.parse(argv, System.getenv());
        } catch (IllegalArgumentException e) {
            System.err.println("worker: " + e.getMessage() + "\n" + WorkerArgs.USAGE);
            System.exit(2);
            return;
        }
        String local = args.name() != null ? args.name() : "dynamic-" + ProcessHandle.current().pid();
        SimulatedTasks sim = new SimulatedTasks(new DirStore(args.stateDir(), local, args.changelogLen()),
                args.replayRate(), args.processRate());
        JsonLines out = new JsonLines(System.out);
        MemberConfig config = MemberConfig.of(args.url(), args.group(), args.topics());
        if (args.name() != null) {
            config = config.withName(args.name());
        }
        if (args.token() != null) {
            config = config.withMemberToken(args.token());
        }
        if (args.endpoint() != null) {
            config = config.withEndpoint(args.endpoint());
        }
        for (Map.Entry<String, String> pair : args.metadata().entrySet()) {
            config = config.withMetadata(pair.getKey(), pair.getValue());
        }
        Member member;
        try {
            member = Member.start(config, new Worker(sim, out), assignment -> {
                synchronized (sim) {
                    return sim.lags(assignment);
                }
            });
        } catch (IllegalArgumentException e) {
            System.err.println("worker: " + e.getMessage());
            System.exit(2);
            return;
        }
        System.exit(run(member, sim, args, out));
    }

    /** Runs the simulation until the member stops; returns the exit code. */
    private static int run(Member member, SimulatedTasks sim, WorkerArgs args, JsonLines out)
            throws InterruptedException {
        ScheduledExecutorService timers = Executors.newSingleThreadScheduledExecutor(runnable -> {
            Thread t = new Thread(runnable, "worker-ticks");
            t.setDaemon(true);
            return t;
        });
        long[] last = {System.nanoTime()};
        timers.scheduleAtFixedRate(() -> {
            long now = System.nanoTime();
            synchronized (sim) {
                // Process only what the lease allows: a stalled worker whose
                // tasks went elsewhere must not write after them.
                try {
                    sim.tick((now - last[0]) / 1_000_000, member::mayProcess);
                } catch (UncheckedIOException e) {
                    // A task's files could not be written: retried next tick
                    // (an exception here would end every later tick).
                    System.err.println("worker: " + e.getMessage());
                }
            }
            last[0] = now;
            if (args.loadPerTask() != null) {
                // Sent only once the host asks, and only what moved.
                Map<Task, Double> loads = new java.util.HashMap<>();
                member.assignment().active().forEach(task -> loads.put(task, args.loadPerTask()));
                member.reportLoad(loads);
            }
        }, TICK_MS, TICK_MS, TimeUnit.MILLISECONDS);
        if (args.drainAfterS() != null) {
            timers.schedule(member::drain, args.drainAfterS(), TimeUnit.SECONDS);
        }
        // The first SIGTERM or SIGINT drains (then the member leaves); a
        // second leaves at once.
        Signals.onTermination(member::drain, member::leave);
        StopReason reason;
        try {
            reason = member.closed().get();
        } catch (ExecutionException | java.util.concurrent.CancellationException e) {
            System.err.println("worker: the member failed: " + e);
            return 1;
        } finally {
            timers.shutdownNow();
        }
        out.print(out.line("stopped").put("reason", reason.wireName()));
        return reason.isClean() ? 0 : 1;
    }

    @Override
    public void onJoined(String memberId) {
        out.print(out.line("joined").put("member_id", memberId));
    }

    @Override
    public void onTasksAssigned(Collection<Task> tasks) {
        out.print(out.tasks("assigned", tasks));
        set(tasks, SimulatedTasks.Role.ACTIVE);
    }

    @Override
    public void onTasksPromoted(Collection<Task> tasks) {
        out.print(out.tasks("promoted", tasks));
        set(tasks, SimulatedTasks.Role.ACTIVE);
    }

    @Override
    public void onTasksRevoked(Collection<Task> tasks) {
        out.print(out.tasks("revoked", tasks));
        // Processing happens under the lock: once out of the table, a task is
        // stopped, and the member acknowledges when this returns.
        set(tasks, null);
    }

    @Override
    public void onTasksLost(Collection<Task> tasks) {
        out.print(out.tasks("lost", tasks));
        set(tasks, null);
    }

    @Override
    public void onLearnerStarted(Collection<Task> tasks) {
        out.print(out.tasks("learner_started", tasks));
        set(tasks, SimulatedTasks.Role.WARMING);
    }

    @Override
    public void onLearnerStopped(Collection<Task> tasks) {
        out.print(out.tasks("learner_stopped", tasks));
        stopCopies(tasks);
    }

    @Override
    public void onStandbyStarted(Collection<Task> tasks) {
        out.print(out.tasks("standby_started", tasks));
        set(tasks, SimulatedTasks.Role.WARMING);
    }

    @Override
    public void onStandbyStopped(Collection<Task> tasks) {
        out.print(out.tasks("standby_stopped", tasks));
        stopCopies(tasks);
    }

    @Override
    public void onDraining() {
        out.print(out.line("draining"));
    }

    @Override
    public void onDrained() {
        out.print(out.line("drained"));
    }

    @Override
    public void onFenced(boolean rejoining) {
        out.print(out.line("fenced").put("rejoining", rejoining));
    }

    @Override
    public void onReplaced(String memberName) {
        out.print(out.line("replaced").put("member_name", memberName));
    }

    @Override
    public void onError(Failure failure) {
        out.print(out.line("error").put("message", failure.kind() + ": " + failure.message()));
    }

    private void set(Collection<Task> tasks, SimulatedTasks.Role role) {
        synchronized (sim) {
            sim.set(tasks, role);
        }
    }

    /** A copy that is active here stays active. */
    private void stopCopies(Collection<Task> tasks) {
        synchronized (sim) {
            for (Task task : tasks) {
                if (sim.role(task) == SimulatedTasks.Role.WARMING) {
                    sim.set(java.util.List.of(task), null);
                }
            }
        }
    }
}
