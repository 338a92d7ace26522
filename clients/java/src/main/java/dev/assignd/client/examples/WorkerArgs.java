package dev.assignd.client.examples;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/** The worker's flags, as {@code client/examples/worker.rs} takes them. */
record WorkerArgs(
        String url,
        String group,
        String name,
        List<String> topics,
        long replayRate,
        long changelogLen,
        long processRate,
        Path stateDir,
        Long drainAfterS,
        String token,
        String endpoint,
        Map<String, String> metadata,
        Double loadPerTask) {

    static final String USAGE = String.join("\n",
            "usage: worker --group NAME --topics A,B [options]",
            "  --url URL[,URL...]   the host, or a cluster's bootstrap URLs (default http://127.0.0.1:7070)",
            "  --name NAME          a static member name (default: dynamic)",
            "  --replay-rate N      records/s a learner, standby or restoring task replays (default 1000)",
            "  --changelog-len N    a changelog's length when no worker wrote it yet (default 10000)",
            "  --process-rate N     records/s an active task appends (default 5)",
            "  --state-dir DIR      changelogs and checkpoints (default worker-state)",
            "  --drain-after S      drain after S seconds",
            "  --token TOKEN        the group's member token (default $ASSIGND_MEMBER_TOKEN)",
            "  --endpoint URL       where this worker serves, published in the routing table",
            "  --metadata KEY=VALUE published with the endpoint (repeatable)",
            "  --load-per-task LOAD report this load for every active task (a synthetic load)");

    /**
     * Reads {@code --flag value} and {@code --flag=value} arguments.
     *
     * @throws IllegalArgumentException naming what is wrong
     */
    static WorkerArgs parse(String[] args, Map<String, String> env) {
        String url = "http://127.0.0.1:7070";
        String group = null;
        String name = null;
        List<String> topics = new ArrayList<>();
        long replayRate = 1000;
        long changelogLen = 10_000;
        long processRate = 5;
        Path stateDir = Path.of("worker-state");
        Long drainAfter = null;
        String token = env.get("ASSIGND_MEMBER_TOKEN");
        String endpoint = null;
        Map<String, String> metadata = new TreeMap<>();
        Double loadPerTask = null;
        for (int i = 0; i < args.length; i++) {
            String flag = args[i];
            String value;
            int equals = flag.indexOf('=');
            if (flag.startsWith("--") && equals > 0) {
                value = flag.substring(equals + 1);
                flag = flag.substring(0, equals);
            } else if (i + 1 < args.length) {
                value = args[++i];
            } else {
                throw new IllegalArgumentException(flag + " needs a value");
            }
            switch (flag) {
                case "--url" -> url = value;
                case "--group" -> group = value;
                case "--name" -> name = value;
                case "--topics" -> {
                    for (String topic : value.split(",")) {
                        if (!topic.isBlank()) {
                            topics.add(topic.trim());
                        }
                    }
                }
                case "--replay-rate" -> replayRate = number(flag, value);
                case "--changelog-len" -> changelogLen = number(flag, value);
                case "--process-rate" -> processRate = number(flag, value);
                case "--state-dir" -> stateDir = Path.of(value);
                case "--drain-after" -> drainAfter = number(flag, value);
                case "--token" -> token = value;
                case "--endpoint" -> endpoint = value;
                case "--metadata" -> {
                    int split = value.indexOf('=');
                    if (split < 1) {
                        throw new IllegalArgumentException("--metadata takes KEY=VALUE, not " + value);
                    }
                    metadata.put(value.substring(0, split), value.substring(split + 1));
                }
                case "--load-per-task" -> loadPerTask = load(value);
                default -> throw new IllegalArgumentException("unknown flag " + flag);
            }
        }
        if (group == null) {
            throw new IllegalArgumentException("--group is required");
        }
        if (topics.isEmpty()) {
            throw new IllegalArgumentException("--topics is required");
        }
        return new WorkerArgs(url, group, name, topics, replayRate, changelogLen, processRate, stateDir, drainAfter,
                token, endpoint, Map.copyOf(metadata), loadPerTask);
    }

    private static double load(String value) {
        try {
            double load = Double.parseDouble(value.trim());
            if (!Double.isFinite(load) || load < 0 || load > 1e15) {
                throw new NumberFormatException();
            }
            return load;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("--load-per-task takes a number from 0 to 1e15, not " + value);
        }
    }

    private static long number(String flag, String value) {
        try {
            long n = Long.parseLong(value.trim());
            if (n < 0) {
                throw new NumberFormatException();
            }
            return n;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(flag + " takes a whole number, not " + value);
        }
    }
}
