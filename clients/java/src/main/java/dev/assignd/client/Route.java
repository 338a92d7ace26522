package dev.assignd.client;

import java.util.List;
import java.util.Optional;

/**
 * Where one task of a topic goes, as one routing table says.
 *
 * @param topic     the topic
 * @param partition the task's partition (a key's, by {@link Partitioner})
 * @param owner     the member processing the task now; empty: nobody
 * @param movingTo  the member the task is about to move to; empty if it is not moving
 *                  (or moves to nobody yet)
 * @param learners  members warming the task up to take it over, by member id
 * @param standbys  members keeping hot copies, by member id
 * @param epoch     the table's epoch: pass the route to {@link Router#misrouted} when its
 *                  owner answers "not mine"
 * @param fresh     whether the host's promise held when the route was read: no task listed
 *                  active and not moving gets another owner within the table's bound; past
 *                  it the route is probably right, but without the promise
 */
public record Route(String topic, int partition, Optional<RouteMember> owner, Optional<RouteMember> movingTo,
        List<RouteMember> learners, List<RouteMember> standbys, long epoch, boolean fresh) {

    public Route {
        learners = List.copyOf(learners);
        standbys = List.copyOf(standbys);
    }

    /** The owner's endpoint, if the task has an owner that published one. */
    public Optional<String> endpoint() {
        return owner.flatMap(RouteMember::endpoint);
    }
}
