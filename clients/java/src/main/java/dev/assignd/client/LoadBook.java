package dev.assignd.client;

import java.util.List;
import java.util.TreeMap;
import java.util.function.Predicate;

/**
 * A member's load reports, without I/O: the load the application set for each
 * of its active tasks, its utilisation and load capacity, what the host has
 * acknowledged of them, and so which of them the next heartbeat carries. A
 * port of the Rust client's {@code client/src/loads.rs}.
 *
 * <p>Nothing is sent until an answer's {@code load_report} says {@code changes}
 * or {@code full} (an older host refuses unknown fields). After {@code full}
 * the next heartbeat carries every known load of an active task (an unknown one
 * is left out: unknown is not zero), and the utilisation and load capacity when
 * set; after {@code changes}, the loads that moved by more than the threshold
 * (relative to the acknowledged value) or were never acknowledged, the
 * utilisation when it moved by more than {@link #UTILISATION_STEP}, and the
 * load capacity when it changed. A value counts as acknowledged once the
 * heartbeat that carried it got an answer.
 */
final class LoadBook {

    /** How far a task's load may move, relative to the acknowledged value, before it is sent again (10 %). */
    static final double LOAD_THRESHOLD_DEFAULT = 0.1;
    /** How far the utilisation may move (absolute) before it is sent again. */
    static final double UTILISATION_STEP = 0.05;
    /** The largest load (and load capacity) the host accepts. */
    static final double LOAD_MAX = 1e15;
    /** The largest utilisation the host accepts (1.0 is fully used). */
    static final double UTILISATION_MAX = 10;

    /** The load fields of one heartbeat; all {@code null}: it carries none. */
    record Fields(List<LoadItem> loads, Double utilisation, Double loadCapacity) {
        static final Fields NONE = new Fields(null, null, null);
    }

    private record Sent(boolean full, TreeMap<Task, Double> loads, Double utilisation, Double loadCapacity) {
    }

    private final double threshold;
    private LoadReport report = LoadReport.NONE;
    private final TreeMap<Task, Double> loads = new TreeMap<>();
    private TreeMap<Task, Double> acked = new TreeMap<>();
    Double utilisation;
    private Double ackedUtilisation;
    Double loadCapacity;
    private Double ackedLoadCapacity;
    private Sent inFlight;

    LoadBook(double threshold) {
        this.threshold = threshold;
    }

    static boolean validLoad(double load) {
        return Double.isFinite(load) && load >= 0 && load <= LOAD_MAX;
    }

    static boolean validUtilisation(Double utilisation) {
        return utilisation == null || (Double.isFinite(utilisation) && utilisation >= 0 && utilisation <= UTILISATION_MAX);
    }

    static boolean validLoadCapacity(Double capacity) {
        return capacity == null || (Double.isFinite(capacity) && capacity > 0 && capacity <= LOAD_MAX);
    }

    /** The application's current load of an active task (validated by the caller). */
    void setLoad(Task task, double load) {
        loads.put(task, load);
    }

    /** Forgets the loads (and acknowledged loads) of tasks no longer active. */
    void retainActive(Predicate<Task> active) {
        loads.keySet().removeIf(active.negate());
        acked.keySet().removeIf(active.negate());
    }

    /** The fields of the heartbeat built now, in flight until {@link #answered} or {@link #failed}. */
    Fields build() {
        Sent sent = switch (report) {
            case FULL -> new Sent(true, new TreeMap<>(loads), utilisation, loadCapacity);
            case CHANGES -> changes();
            case NONE -> null;
        };
        inFlight = sent;
        if (sent == null) {
            return Fields.NONE;
        }
        List<LoadItem> items = sent.full || !sent.loads.isEmpty() ? LoadItem.of(sent.loads) : null;
        return new Fields(items, sent.utilisation, sent.loadCapacity);
    }

    private Sent changes() {
        TreeMap<Task, Double> moved = new TreeMap<>();
        loads.forEach((task, load) -> {
            Double before = acked.get(task);
            if (before == null || Math.abs(load - before) > threshold * before) {
                moved.put(task, load);
            }
        });
        Double u = utilisation != null
                && (ackedUtilisation == null || Math.abs(utilisation - ackedUtilisation) > UTILISATION_STEP)
                ? utilisation : null;
        Double c = loadCapacity != null && !loadCapacity.equals(ackedLoadCapacity) ? loadCapacity : null;
        return new Sent(false, moved, u, c);
    }

    /** The heartbeat in flight got an answer asking {@code next}. */
    void answered(LoadReport next) {
        Sent sent = inFlight;
        inFlight = null;
        if (sent != null) {
            if (sent.full) {
                acked = new TreeMap<>();
                ackedUtilisation = sent.utilisation;
                ackedLoadCapacity = sent.loadCapacity;
            }
            acked.putAll(sent.loads);
            if (sent.utilisation != null) {
                ackedUtilisation = sent.utilisation;
            }
            if (sent.loadCapacity != null) {
                ackedLoadCapacity = sent.loadCapacity;
            }
        }
        report = next;
        if (next != LoadReport.CHANGES) {
            forgetAcked();
        }
    }

    /** The heartbeat in flight failed: the next carries its values again. */
    void failed() {
        inFlight = null;
    }

    /** A new member (or a leave): nothing is sent until an answer asks. */
    void reset() {
        inFlight = null;
        report = LoadReport.NONE;
        forgetAcked();
    }

    private void forgetAcked() {
        acked = new TreeMap<>();
        ackedUtilisation = null;
        ackedLoadCapacity = null;
    }
}
