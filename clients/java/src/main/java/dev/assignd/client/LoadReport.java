package dev.assignd.client;

/** What an answer asks of the member's next heartbeat's loads ({@code load_report}). */
public enum LoadReport {
    /** Send no load fields: the group takes no loads (also an absent or unknown value). */
    NONE,
    /** Send the loads that moved past the threshold, and those never sent. */
    CHANGES,
    /** The host has none of this member's loads: send them all. */
    FULL;

    /** An answer's {@code load_report}; absent ({@code null}) or unknown reads as {@link #NONE}. */
    public static LoadReport fromWire(String value) {
        if ("changes".equals(value)) {
            return CHANGES;
        }
        return "full".equals(value) ? FULL : NONE;
    }
}
