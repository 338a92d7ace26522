package dev.assignd.client;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * One item of a heartbeat's {@code loads}: every partition {@code first} to
 * {@code last} of {@code topic} has {@code load}; in JSON {@code [topic,
 * partition, load]} or {@code [topic, first, last, load]}.
 */
public record LoadItem(String topic, int first, int last, double load) {

    /** {@code loads} (sorted) as items: each run of consecutive partitions of a topic with one load as a range. */
    static List<LoadItem> of(Map<Task, Double> loads) {
        List<LoadItem> items = new ArrayList<>();
        loads.forEach((task, load) -> {
            int n = items.size();
            LoadItem last = n == 0 ? null : items.get(n - 1);
            if (last != null && last.topic.equals(task.topic()) && last.load == load
                    && (long) last.last + 1 == task.partition()) {
                items.set(n - 1, new LoadItem(last.topic, last.first, task.partition(), load));
            } else {
                items.add(new LoadItem(task.topic(), task.partition(), task.partition(), load));
            }
        });
        return items;
    }
}
