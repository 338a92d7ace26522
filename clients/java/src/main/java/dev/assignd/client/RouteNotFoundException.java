package dev.assignd.client;

/** A lookup that has no route: no table yet, a topic the table does not know, or a partition past its count. */
public final class RouteNotFoundException extends Exception {

    private static final long serialVersionUID = 1L;

    /** Why there is no route. */
    public enum Reason {
        /** The router has no table yet ({@link Router#ready} has not returned). */
        NO_TABLE,
        /** The table has no such topic. */
        UNKNOWN_TOPIC,
        /** The topic has fewer partitions. */
        PARTITION_OUT_OF_RANGE
    }

    private final Reason reason;

    public RouteNotFoundException(Reason reason, String message) {
        super(message);
        this.reason = reason;
    }

    public Reason reason() {
        return reason;
    }
}
