package dev.assignd.client;

import java.lang.System.Logger.Level;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

/**
 * For everyone outside a group (a gateway, a producer, a scheduler): which
 * member owns a key right now, and at what address. The router keeps the
 * group's newest routing table by a blocking query on a daemon thread of its
 * own ({@code docs/routing.md}, "Watching") and answers lookups from the
 * table's index, without a round trip or a lock.
 *
 * <pre>{@code
 * try (Router router = Router.start(RouterConfig.of(url, "orders").withToken(readerToken))) {
 *     router.ready(Duration.ofSeconds(5));
 *     Route route = router.ownerOf("orders", "customer-42");
 *     // send to route.endpoint(); on "not mine": router.misrouted(route)
 * }
 * }</pre>
 *
 * <p>Every method is thread-safe.
 */
public final class Router implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger(Router.class.getName());

    /** The first pause after a failure; it doubles up to {@link #BACKOFF_MAX_MS} while no host answers. */
    static final long BACKOFF_MIN_MS = 100;
    static final long BACKOFF_MAX_MS = 2_000;
    /** A refusal (a wrong token, no such group) is not over soon: asked again every few seconds. */
    static final long REFUSED_PAUSE_MS = 5_000;

    private final RouterConfig config;
    private final RoutesClient client;
    private final Consumer<RouteTable> onChange;
    private final Thread thread;
    /** Runs the refreshes {@link #misrouted} asks for, one at a time. */
    private final ExecutorService refresher;
    private final AtomicLong misroutes = new AtomicLong();
    private final AtomicBoolean refreshing = new AtomicBoolean();
    /** The URL asked now. */
    private final AtomicInteger at = new AtomicInteger();
    private volatile RouteTable table;
    private volatile boolean closed;
    /** Guards {@link #lastFailure} and orders the tables taken and the listener's calls; notified on every outcome. */
    private final Object outcomes = new Object();
    /** The last request's failure: a refusal, or a message; {@code null} after an answer. */
    private Object lastFailure;

    private Router(RouterConfig config, Consumer<RouteTable> onChange) {
        this.config = config;
        this.client = new RoutesClient(config);
        this.onChange = onChange;
        this.thread = new Thread(this::run, "assignd-router-" + config.group());
        this.thread.setDaemon(true);
        this.refresher = Executors.newSingleThreadExecutor(task -> {
            Thread t = new Thread(task, "assignd-router-refresh-" + config.group());
            t.setDaemon(true);
            return t;
        });
    }

    /** Starts a router without a change listener. */
    public static Router start(RouterConfig config) {
        return start(config, table -> {
        });
    }

    /**
     * Starts a router: it asks for the table at once.
     *
     * @param onChange called with each new table after its epoch changed, one call at a
     *                 time in the order the tables were taken, on the router's thread: it
     *                 must return quickly
     * @throws IllegalArgumentException if the config cannot work (see {@link RouterConfig#check()})
     */
    public static Router start(RouterConfig config, Consumer<RouteTable> onChange) {
        config.check();
        Router router = new Router(config, onChange);
        router.thread.start();
        return router;
    }

    /**
     * Waits for the first table.
     *
     * @throws RouterRefusedException at once when the host refused the router (401, 403, 404)
     * @throws TimeoutException       when no table came within {@code timeout}, with the last failure
     */
    public void ready(Duration timeout) throws RouterRefusedException, TimeoutException, InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        synchronized (outcomes) {
            while (table == null) {
                if (lastFailure instanceof RouterRefusedException refusal) {
                    throw refusal;
                }
                long leftMs = (deadline - System.nanoTime()) / 1_000_000;
                if (leftMs <= 0 || closed) {
                    throw new TimeoutException("no routing table of group " + config.group() + " within "
                            + timeout.toMillis() + " ms" + (lastFailure == null ? "" : ": " + lastFailure)
                            + (closed ? " (the router is closed)" : ""));
                }
                outcomes.wait(leftMs);
            }
        }
    }

    /** The table in force, or empty before the first. */
    public Optional<RouteTable> table() {
        return Optional.ofNullable(table);
    }

    /** The route of {@code key} in {@code topic} by the table in force. */
    public Route ownerOf(String topic, byte[] key) throws RouteNotFoundException {
        return current().ownerOf(topic, key);
    }

    /** The route of {@code key}'s UTF-8 bytes in {@code topic}. */
    public Route ownerOf(String topic, String key) throws RouteNotFoundException {
        return current().ownerOf(topic, key);
    }

    /** The route of one task by the table in force. */
    public Route ownerOfPartition(String topic, int partition) throws RouteNotFoundException {
        return current().ownerOfPartition(topic, partition);
    }

    private RouteTable current() throws RouteNotFoundException {
        RouteTable held = table;
        if (held == null) {
            throw new RouteNotFoundException(RouteNotFoundException.Reason.NO_TABLE, "no routing table yet");
        }
        return held;
    }

    /**
     * The owner of {@code route} answered "not mine": counted, and when the
     * route came from the newest table held, a newer one is asked for at once
     * (besides the watch).
     */
    public void misrouted(Route route) {
        misroutes.incrementAndGet();
        RouteTable held = table;
        if (held == null || route.epoch() < held.epoch() || closed || !refreshing.compareAndSet(false, true)) {
            return;
        }
        try {
            refresher.execute(() -> {
                try {
                    if (client.fetch(at.get(), null, Duration.ZERO) instanceof RoutesClient.Answer.Table answer) {
                        offer(answer.table(), null);
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                } finally {
                    refreshing.set(false);
                }
            });
        } catch (RejectedExecutionException e) {
            // Closed meanwhile.
            refreshing.set(false);
        }
    }

    /** How many times {@link #misrouted} was called. */
    public long misroutes() {
        return misroutes.get();
    }

    /** Stops the router; the last table stays readable. */
    @Override
    public void close() {
        closed = true;
        thread.interrupt();
        refresher.shutdownNow();
        synchronized (outcomes) {
            outcomes.notifyAll();
        }
        if (Thread.currentThread() != thread) {
            try {
                thread.join(Duration.ofSeconds(5).toMillis());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** One blocking query at a time, each answer's epoch the next one's {@code after_epoch}. */
    private void run() {
        long backoffMs = BACKOFF_MIN_MS;
        try {
            while (!closed) {
                RouteTable held = table;
                Long after = held == null ? null : held.epoch();
                int asked = at.get();
                RoutesClient.Answer answer = client.fetch(asked, after, client.waitPast(held));
                long pauseMs;
                if (answer instanceof RoutesClient.Answer.Table taken) {
                    offer(taken.table(), after);
                    ended(null);
                    backoffMs = BACKOFF_MIN_MS;
                    continue;
                } else if (answer instanceof RoutesClient.Answer.Refused refused) {
                    LOG.log(Level.WARNING, "router of {0}: {1}", config.group(), refused.refusal().getMessage());
                    ended(refused.refusal());
                    pauseMs = REFUSED_PAUSE_MS;
                } else {
                    RoutesClient.Answer.Failed failed = (RoutesClient.Answer.Failed) answer;
                    LOG.log(Level.DEBUG, "router of {0}: {1}", config.group(), failed.message());
                    ended(failed.message());
                    at.set((asked + 1) % client.urls());
                    pauseMs = Math.max(backoffMs, failed.retryAfterMs());
                    backoffMs = Math.min(backoffMs * 2, BACKOFF_MAX_MS);
                }
                Thread.sleep(pauseMs);
            }
        } catch (InterruptedException e) {
            // Closed.
        }
    }

    /**
     * Takes {@code offered} if it is newer than the table held, or older than the
     * {@code after_epoch} of the watch it answers (the host answers a lower epoch
     * only when the router's came from elsewhere). The same epoch again moves
     * the bound on, if the host read it later.
     */
    void offer(RouteTable offered, Long after) {
        synchronized (outcomes) {
            RouteTable held = table;
            if (held == null || offered.epoch() > held.epoch() || (after != null && offered.epoch() < after)) {
                table = offered;
                try {
                    onChange.accept(offered);
                } catch (RuntimeException e) {
                    LOG.log(Level.ERROR, "router of " + config.group() + ": the change listener failed", e);
                }
            } else if (offered.epoch() == held.epoch() && offered.readAtNanos() - held.readAtNanos() > 0) {
                table = held.renewed(offered.sentAtNanos(), offered.waited().toNanos());
            }
            outcomes.notifyAll();
        }
    }

    private void ended(Object failure) {
        synchronized (outcomes) {
            lastFailure = failure;
            outcomes.notifyAll();
        }
    }
}
