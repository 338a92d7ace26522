package dev.assignd.client;

import java.util.List;

/**
 * What the member machine tells the application, in order. Task lists are
 * sorted (see {@link Task}). A {@link RebalanceListener} receives them through
 * its hooks; {@link MemberMachine#pollEvent()} returns them raw.
 */
public sealed interface MemberEvent {

    /** The member joined (or rejoined) with this member id. */
    record Joined(String memberId) implements MemberEvent {
    }

    /** Newly active tasks without a warm copy here: start processing them. */
    record Assigned(List<Task> tasks) implements MemberEvent {
        public Assigned {
            tasks = List.copyOf(tasks);
        }
    }

    /** Stop processing these, then acknowledge {@code ack}; until then they stay owned. */
    record Revoked(long ack, List<Task> tasks) implements MemberEvent {
        public Revoked {
            tasks = List.copyOf(tasks);
        }
    }

    /** Start warming these up (replay their state) and report their lag. */
    record LearnerStarted(List<Task> tasks) implements MemberEvent {
        public LearnerStarted {
            tasks = List.copyOf(tasks);
        }
    }

    /** Stop warming these up: they went elsewhere. */
    record LearnerStopped(List<Task> tasks) implements MemberEvent {
        public LearnerStopped {
            tasks = List.copyOf(tasks);
        }
    }

    /** Learner or standby copies that became active: their warm state is the active one now. */
    record Promoted(List<Task> tasks) implements MemberEvent {
        public Promoted {
            tasks = List.copyOf(tasks);
        }
    }

    record StandbyStarted(List<Task> tasks) implements MemberEvent {
        public StandbyStarted {
            tasks = List.copyOf(tasks);
        }
    }

    record StandbyStopped(List<Task> tasks) implements MemberEvent {
        public StandbyStopped {
            tasks = List.copyOf(tasks);
        }
    }

    /** The member is draining: its tasks will be revoked as their new owners warm up. */
    record Draining() implements MemberEvent {
    }

    /** The drain finished: the member holds nothing and leaves. */
    record Drained() implements MemberEvent {
    }

    /** These tasks may already be active elsewhere: stop them at once (no acknowledgement). */
    record Lost(List<Task> tasks) implements MemberEvent {
        public Lost {
            tasks = List.copyOf(tasks);
        }
    }

    /** The host removed this member; it rejoins unless it was leaving or draining. */
    record Fenced(boolean rejoining) implements MemberEvent {
    }

    /** Another process joined with this member's name: this member stops. */
    record Replaced(String memberName) implements MemberEvent {
    }

    /** A heartbeat failed; the machine retries unless the failure says otherwise. */
    record Error(Failure failure) implements MemberEvent {
    }
}
