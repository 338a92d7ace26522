package dev.assignd.client;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import java.util.ArrayList;
import java.util.List;

/**
 * Task lists in their two JSON forms. The writer writes each run of
 * consecutive partitions of a topic as a range {@code [topic, first, last]}
 * (both included) and a lone task as {@code [topic, partition]}; the reader
 * takes either form, item by item. A member of a million tasks then sends its
 * lists in a few hundred bytes instead of 17 MB.
 */
public final class TaskRanges {

    /** The most tasks one list may expand to (the host's limit). */
    public static final long TASKS_PER_LIST_MAX = 1_000_000;

    private TaskRanges() {
    }

    /** Writes {@code tasks} compact; runs are found in the order given, so sorted tasks give the fewest items. */
    public static ArrayNode write(List<Task> tasks) {
        ArrayNode items = JsonNodeFactory.instance.arrayNode();
        int i = 0;
        while (i < tasks.size()) {
            Task first = tasks.get(i);
            int last = first.partition();
            int j = i + 1;
            while (j < tasks.size()
                    && tasks.get(j).topic().equals(first.topic())
                    && last != Integer.MAX_VALUE
                    && tasks.get(j).partition() == last + 1) {
                last = tasks.get(j).partition();
                j++;
            }
            ArrayNode item = items.addArray().add(first.topic()).add(first.partition());
            if (last != first.partition()) {
                item.add(last);
            }
            i = j;
        }
        return items;
    }

    /**
     * Reads a list of {@code [topic, partition]} and {@code [topic, first, last]}
     * items, ranges expanded; {@code null} or a missing list reads as empty.
     *
     * @throws WireException if an item is malformed, a range ends before it
     *                       starts, or the list passes {@link #TASKS_PER_LIST_MAX}
     */
    public static List<Task> read(JsonNode list) throws WireException {
        List<Task> tasks = new ArrayList<>();
        if (list == null || list.isNull()) {
            return tasks;
        }
        if (!list.isArray()) {
            throw new WireException("a task list is an array, not " + list.getNodeType());
        }
        for (JsonNode item : list) {
            if (!item.isArray() || item.size() < 2 || item.size() > 3 || !item.get(0).isTextual()) {
                throw new WireException("a task is [topic, partition] or [topic, first, last], not " + item);
            }
            String topic = item.get(0).textValue();
            int first = partition(item.get(1));
            int last = item.size() == 3 ? partition(item.get(2)) : first;
            if (first > last) {
                throw new WireException("the range " + item + " ends before it starts");
            }
            if (tasks.size() + (long) (last - first) + 1 > TASKS_PER_LIST_MAX) {
                throw new WireException("more than " + TASKS_PER_LIST_MAX + " tasks in one list");
            }
            for (int p = first; ; p++) {
                tasks.add(new Task(topic, p));
                if (p == last) {
                    break;
                }
            }
        }
        return tasks;
    }

    /** One item of a task list: {@code [topic, first, last]}, both included. */
    @FunctionalInterface
    interface RangeVisitor {
        void visit(String topic, int first, int last);
    }

    /**
     * Calls {@code visitor} for each item of a task list without expanding it;
     * {@code null} or a missing list has none.
     *
     * @throws WireException if an item is malformed or a range ends before it starts
     */
    static void eachRange(JsonNode list, RangeVisitor visitor) throws WireException {
        if (list == null || list.isNull()) {
            return;
        }
        if (!list.isArray()) {
            throw new WireException("a task list is an array, not " + list.getNodeType());
        }
        for (JsonNode item : list) {
            if (!item.isArray() || item.size() < 2 || item.size() > 3 || !item.get(0).isTextual()) {
                throw new WireException("a task is [topic, partition] or [topic, first, last], not " + item);
            }
            int first = partition(item.get(1));
            int last = item.size() == 3 ? partition(item.get(2)) : first;
            if (first > last) {
                throw new WireException("the range " + item + " ends before it starts");
            }
            visitor.visit(item.get(0).textValue(), first, last);
        }
    }

    private static int partition(JsonNode node) throws WireException {
        if (!node.isIntegralNumber() || !node.canConvertToInt() || node.intValue() < 0) {
            throw new WireException("a partition is a whole number from 0 to " + Integer.MAX_VALUE + ", not " + node);
        }
        return node.intValue();
    }
}
