package dev.assignd.client;

/** The stable codes of the host's {@code {"error": {"code", "message"}}} body that clients act on. */
public final class ErrorCodes {
    public static final String UNKNOWN_GROUP = "unknown_group";
    public static final String UNKNOWN_MEMBER = "unknown_member";
    /** The member was removed (it left, expired, or held tasks too long): rejoining is right. */
    public static final String FENCED = "fenced";
    /** Another process took the member's name: rejoining would fence that one in turn. */
    public static final String REPLACED = "replaced";
    public static final String STALE_EPOCH = "stale_epoch";
    /** In a cluster: the node does not coordinate the group. */
    public static final String NOT_COORDINATOR = "not_coordinator";
    /** In a cluster: the group's shard is between owners (the node processed nothing). */
    public static final String SHARD_UNAVAILABLE = "shard_unavailable";
    /** In a cluster: the node cannot reach the group's coordinator. */
    public static final String COORDINATOR_UNREACHABLE = "coordinator_unreachable";

    private ErrorCodes() {
    }
}
