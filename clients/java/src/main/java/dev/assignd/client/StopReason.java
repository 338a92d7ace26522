package dev.assignd.client;

/** Why a member stopped for good. */
public enum StopReason {
    /** It left the group (asked by the application). */
    LEFT,
    /** Its drain finished and it left. */
    DRAINED,
    /** Another process joined with its member name and took its slot. */
    REPLACED,
    /** The host fenced it while it was leaving or draining. */
    FENCED,
    /** The host no longer knew it ({@code unknown_member}/{@code unknown_group}) while it was leaving or draining. */
    REMOVED;

    /** The lower-case name the conformance vectors and the worker print. */
    public String wireName() {
        return name().toLowerCase(java.util.Locale.ROOT);
    }

    /** Whether a process that stopped for this reason ends successfully (exit 0). */
    public boolean isClean() {
        return this == LEFT || this == DRAINED;
    }
}
