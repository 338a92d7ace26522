package dev.assignd.client.examples;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.assignd.client.Task;
import java.io.PrintStream;
import java.util.Collection;

/** The worker's output: one JSON object per line on stdout, flushed at once, with the wall-clock time. */
final class JsonLines {

    private static final ObjectMapper MAPPER = new ObjectMapper();

    private final PrintStream out;

    JsonLines(PrintStream out) {
        this.out = out;
    }

    /** A line {@code {"ts_ms", "event"}} to add fields to before {@link #print}. */
    ObjectNode line(String event) {
        return MAPPER.createObjectNode().put("ts_ms", System.currentTimeMillis()).put("event", event);
    }

    ObjectNode tasks(String event, Collection<Task> tasks) {
        ObjectNode line = line(event);
        ArrayNode list = line.putArray("tasks");
        tasks.forEach(task -> list.addArray().add(task.topic()).add(task.partition()));
        return line;
    }

    synchronized void print(ObjectNode line) {
        try {
            out.println(MAPPER.writeValueAsString(line));
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("a JSON tree always writes", e);
        }
        out.flush();
    }
}
