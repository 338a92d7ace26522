package dev.assignd.client;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * One routing table ({@code GET /v1/groups/{group}/routes}, {@code docs/routing.md})
 * as a router holds it: the host's body, read once into an index that answers a
 * lookup without scanning the task lists (per topic, the owner of each
 * partition as an index into the members). Immutable, so any number of threads
 * read it without a lock.
 */
public final class RouteTable {

    /** Marks a partition nobody owns (or that moves to nobody). */
    private static final int NO_MEMBER = -1;

    private final String group;
    private final long epoch;
    private final long groupEpoch;
    private final long validMs;
    /** When the request this table answers was sent, on {@link System#nanoTime()}'s clock. */
    private final long sentAtNanos;
    /** How long that request waited at the host before the table was read. */
    private final long waitedNanos;
    private final Map<String, Integer> topics;
    /** Every member, sorted by member id: indices sorted are ids sorted. */
    private final List<RouteMember> members;
    private final Map<String, TopicIndex> index;

    /** One topic's partitions: indices into {@link #members}, learners and standbys sparse. */
    private record TopicIndex(int[] owner, int[] movingTo, Map<Integer, int[]> learners,
            Map<Integer, int[]> standbys) {
    }

    private RouteTable(RouteTable table, long sentAtNanos, long waitedNanos) {
        this.group = table.group;
        this.epoch = table.epoch;
        this.groupEpoch = table.groupEpoch;
        this.validMs = table.validMs;
        this.sentAtNanos = sentAtNanos;
        this.waitedNanos = waitedNanos;
        this.topics = table.topics;
        this.members = table.members;
        this.index = table.index;
    }

    private RouteTable(Builder built) {
        this.group = built.group;
        this.epoch = built.epoch;
        this.groupEpoch = built.groupEpoch;
        this.validMs = built.validMs;
        this.sentAtNanos = built.sentAtNanos;
        this.waitedNanos = built.waitedNanos;
        this.topics = Collections.unmodifiableMap(built.topics);
        this.members = List.copyOf(built.members);
        Map<String, TopicIndex> topicIndex = new HashMap<>();
        built.owner.forEach((topic, owner) -> topicIndex.put(topic, new TopicIndex(owner, built.movingTo.get(topic),
                frozen(built.learners.get(topic)), frozen(built.standbys.get(topic)))));
        this.index = topicIndex;
    }

    /**
     * Reads a routes answer's body and indexes it, as answered at once.
     *
     * @param sentAtNanos when the request it answers was sent, by {@link System#nanoTime()}
     * @throws WireException if the body is not a routing table, or holds more tasks than a group may
     */
    public static RouteTable parse(byte[] body, long sentAtNanos) throws WireException {
        return parse(body, sentAtNanos, Duration.ZERO);
    }

    /**
     * Reads a routes answer's body and indexes it.
     *
     * @param sentAtNanos when the request it answers was sent, by {@link System#nanoTime()}
     * @param waited      how long the request waited at the host before the table was read (the answer's
     *                    {@code Assignd-Routes-Waited-Ms}): the bound counts from then
     * @throws WireException if the body is not a routing table, or holds more tasks than a group may
     */
    public static RouteTable parse(byte[] body, long sentAtNanos, Duration waited) throws WireException {
        return new Builder(Wire.parse(body), sentAtNanos, waited.toNanos()).build();
    }

    /** The same table, its bound counted from a later request that answered the same epoch. */
    RouteTable renewed(long sentAtNanos, long waitedNanos) {
        return new RouteTable(this, sentAtNanos, waitedNanos);
    }

    public String group() {
        return group;
    }

    /** The table's counter: it rises with every change to what the table says, and never goes back. */
    public long epoch() {
        return epoch;
    }

    /** The group epoch (the targets' counter), for reference. */
    public long groupEpoch() {
        return groupEpoch;
    }

    /**
     * The ownership bound: for this long after the request was sent plus {@link #waited()}, no task listed active
     * and not moving gets another owner.
     */
    public Duration valid() {
        return Duration.ofMillis(validMs);
    }

    /** How long the request that got (or last confirmed) this table waited at the host before the table was read. */
    public Duration waited() {
        return Duration.ofNanos(waitedNanos);
    }

    /** Each topic's partition count. */
    public Map<String, Integer> topics() {
        return topics;
    }

    /** Every member of the group, sorted by member id. */
    public List<RouteMember> members() {
        return members;
    }

    /** Whether the ownership bound still holds. */
    public boolean isFresh() {
        return freshAt(System.nanoTime());
    }

    /** Whether the bound holds at {@code nowNanos} (by {@link System#nanoTime()}). */
    boolean freshAt(long nowNanos) {
        return nowNanos - freshUntilNanos() < 0;
    }

    /** The end of the bound (by {@link System#nanoTime()}): the send time, plus the host's wait, plus {@code valid_ms}. */
    long freshUntilNanos() {
        return readAtNanos() + Duration.ofMillis(validMs).toNanos();
    }

    /** No sooner than when the host read the table: the promise counts from here. */
    long readAtNanos() {
        return sentAtNanos + waitedNanos;
    }

    /** How long ago the request this table answered was sent. */
    public Duration age() {
        return Duration.ofNanos(System.nanoTime() - sentAtNanos);
    }

    long sentAtNanos() {
        return sentAtNanos;
    }

    /** The route of {@code key} (hashed as Kafka's default partitioner does) in {@code topic}. */
    public Route ownerOf(String topic, byte[] key) throws RouteNotFoundException {
        Integer count = topics.get(topic);
        if (count == null || count < 1) {
            throw unknownTopic(topic);
        }
        return ownerOfPartition(topic, Partitioner.partitionForKey(key, count));
    }

    /** The route of {@code key}'s UTF-8 bytes in {@code topic}. */
    public Route ownerOf(String topic, String key) throws RouteNotFoundException {
        return ownerOf(topic, key.getBytes(StandardCharsets.UTF_8));
    }

    /** The route of one task. */
    public Route ownerOfPartition(String topic, int partition) throws RouteNotFoundException {
        return routeAt(topic, partition, System.nanoTime());
    }

    Route routeAt(String topic, int partition, long nowNanos) throws RouteNotFoundException {
        TopicIndex at = index.get(topic);
        if (at == null) {
            throw unknownTopic(topic);
        }
        if (partition < 0 || partition >= at.owner().length) {
            throw new RouteNotFoundException(RouteNotFoundException.Reason.PARTITION_OUT_OF_RANGE,
                    topic + "/" + partition + " is past the topic's " + at.owner().length + " partitions");
        }
        return new Route(topic, partition, member(at.owner()[partition]),
                at.movingTo() == null ? Optional.empty() : member(at.movingTo()[partition]),
                members(at.learners().get(partition)), members(at.standbys().get(partition)), epoch,
                freshAt(nowNanos));
    }

    private static RouteNotFoundException unknownTopic(String topic) {
        return new RouteNotFoundException(RouteNotFoundException.Reason.UNKNOWN_TOPIC,
                "the routing table has no topic " + topic);
    }

    private Optional<RouteMember> member(int i) {
        return i == NO_MEMBER ? Optional.empty() : Optional.of(members.get(i));
    }

    private List<RouteMember> members(int[] indices) {
        if (indices == null) {
            return List.of();
        }
        List<RouteMember> out = new ArrayList<>(indices.length);
        for (int i : indices) {
            out.add(members.get(i));
        }
        return out;
    }

    private static Map<Integer, int[]> frozen(Map<Integer, TreeSet<Integer>> sparse) {
        if (sparse == null) {
            return Map.of();
        }
        Map<Integer, int[]> out = new HashMap<>();
        sparse.forEach((p, held) -> out.put(p, held.stream().mapToInt(Integer::intValue).toArray()));
        return out;
    }

    @Override
    public String toString() {
        return "RouteTable[group=" + group + ", epoch=" + epoch + ", members=" + members.size() + ", topics=" + topics
                + "]";
    }

    /** Reads the body into the index. */
    private static final class Builder {
        final String group;
        final long epoch;
        final long groupEpoch;
        final long validMs;
        final long sentAtNanos;
        final long waitedNanos;
        final Map<String, Integer> topics = new TreeMap<>();
        final List<RouteMember> members = new ArrayList<>();
        final Map<String, Integer> ids = new HashMap<>();
        final Map<String, int[]> owner = new HashMap<>();
        final Map<String, int[]> movingTo = new HashMap<>();
        final Map<String, Map<Integer, TreeSet<Integer>>> learners = new HashMap<>();
        final Map<String, Map<Integer, TreeSet<Integer>>> standbys = new HashMap<>();
        final JsonNode body;

        Builder(JsonNode body, long sentAtNanos, long waitedNanos) throws WireException {
            if (!body.isObject()) {
                throw new WireException("a routing table is a JSON object");
            }
            this.body = body;
            this.sentAtNanos = sentAtNanos;
            this.waitedNanos = waitedNanos;
            this.group = body.path("group").asText("");
            this.epoch = count(body, "epoch");
            this.groupEpoch = count(body, "group_epoch");
            this.validMs = count(body, "valid_ms");
        }

        RouteTable build() throws WireException {
            readTopics(body.get("topics"));
            readMembers();
            for (Iterator<Map.Entry<String, JsonNode>> it = fields(body.get("active")); it.hasNext(); ) {
                Map.Entry<String, JsonNode> held = it.next();
                int member = ids.get(held.getKey());
                eachTask(held.getValue(), (topic, p) -> owner.get(topic)[p] = member);
            }
            sparse(body.get("learner"), learners);
            sparse(body.get("standby"), standbys);
            readMoves(body.get("moving"));
            return new RouteTable(this);
        }

        private void readTopics(JsonNode node) throws WireException {
            long total = 0;
            for (Iterator<Map.Entry<String, JsonNode>> it = fields(node); it.hasNext(); ) {
                Map.Entry<String, JsonNode> topic = it.next();
                JsonNode n = topic.getValue();
                if (!n.canConvertToInt() || n.intValue() < 0) {
                    throw new WireException("topic " + topic.getKey() + ": a partition count, not " + n);
                }
                total += n.intValue();
                if (total > TaskRanges.TASKS_PER_LIST_MAX) {
                    throw new WireException("more than the " + TaskRanges.TASKS_PER_LIST_MAX + " tasks a group may have");
                }
                topics.put(topic.getKey(), n.intValue());
                int[] none = new int[n.intValue()];
                Arrays.fill(none, NO_MEMBER);
                owner.put(topic.getKey(), none);
            }
        }

        /** Every member, those named only in a task list included, sorted by id. */
        private void readMembers() throws WireException {
            JsonNode described = body.get("members");
            TreeSet<String> all = new TreeSet<>();
            fields(described).forEachRemaining(e -> all.add(e.getKey()));
            for (String lists : List.of("active", "learner", "standby")) {
                fields(body.get(lists)).forEachRemaining(e -> all.add(e.getKey()));
            }
            for (String id : all) {
                JsonNode m = described == null ? null : described.get(id);
                Map<String, String> metadata = new TreeMap<>();
                if (m != null) {
                    fields(m.get("metadata")).forEachRemaining(e -> metadata.put(e.getKey(), e.getValue().asText()));
                }
                ids.put(id, members.size());
                members.add(new RouteMember(id, text(m, "member_name"), text(m, "endpoint"), metadata));
            }
        }

        private void sparse(JsonNode lists, Map<String, Map<Integer, TreeSet<Integer>>> into) throws WireException {
            for (Iterator<Map.Entry<String, JsonNode>> it = fields(lists); it.hasNext(); ) {
                Map.Entry<String, JsonNode> held = it.next();
                int member = ids.get(held.getKey());
                eachTask(held.getValue(), (topic, p) -> into.computeIfAbsent(topic, t -> new HashMap<>())
                        .computeIfAbsent(p, q -> new TreeSet<>()).add(member));
            }
        }

        private void readMoves(JsonNode moves) throws WireException {
            if (moves == null || moves.isNull()) {
                return;
            }
            for (JsonNode move : moves) {
                JsonNode to = move.get("to");
                int member = to == null || to.isNull() ? NO_MEMBER : memberIndex(to.asText());
                eachTask(move.get("tasks"), (topic, p) -> movingTo.computeIfAbsent(topic, t -> {
                    int[] none = new int[owner.get(t).length];
                    Arrays.fill(none, NO_MEMBER);
                    return none;
                })[p] = member);
            }
        }

        /** A member named only as a move's target joins the list (after the sorted ones). */
        private int memberIndex(String id) {
            return ids.computeIfAbsent(id, missing -> {
                members.add(new RouteMember(missing, Optional.empty(), Optional.empty(), Map.of()));
                return members.size() - 1;
            });
        }

        /** Calls {@code task} for every task of {@code list} of a known topic within its count. */
        private void eachTask(JsonNode list, TaskVisitor task) throws WireException {
            TaskRanges.eachRange(list, (topic, first, last) -> {
                int[] partitions = owner.get(topic);
                if (partitions == null) {
                    return;
                }
                for (long p = first; p <= last && p < partitions.length; p++) {
                    task.visit(topic, (int) p);
                }
            });
        }

        private static Iterator<Map.Entry<String, JsonNode>> fields(JsonNode node) {
            return node == null || !node.isObject() ? Collections.emptyIterator() : node.fields();
        }

        private static Optional<String> text(JsonNode member, String field) {
            JsonNode value = member == null ? null : member.get(field);
            return value == null || value.isNull() ? Optional.empty() : Optional.of(value.asText());
        }

        private static long count(JsonNode body, String field) throws WireException {
            JsonNode n = body.get(field);
            if (n == null || !n.canConvertToLong() || n.longValue() < 0) {
                throw new WireException(field + ": a whole number from 0, not " + n);
            }
            return n.longValue();
        }
    }

    @FunctionalInterface
    private interface TaskVisitor {
        void visit(String topic, int partition);
    }
}
