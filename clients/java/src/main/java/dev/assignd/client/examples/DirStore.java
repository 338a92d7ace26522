package dev.assignd.client.examples;

import dev.assignd.client.Task;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

/**
 * Changelogs and checkpoints in files, as decimal text: changelogs (their end
 * offset) shared by every worker under {@code stateDir/changelog}, this
 * worker's checkpoints under {@code stateDir/<local>}, so a static worker
 * restarted under its name starts warm.
 */
final class DirStore {

    private final Path changelogs;
    private final Path checkpoints;
    private final long changelogLen;

    DirStore(Path stateDir, String local, long changelogLen) throws IOException {
        this.changelogs = Files.createDirectories(stateDir.resolve("changelog"));
        this.checkpoints = Files.createDirectories(stateDir.resolve(local));
        this.changelogLen = changelogLen;
    }

    /** The end offset of {@code task}'s changelog. */
    long end(Task task) {
        Long end = read(changelogs.resolve(fileName(task)));
        return end == null ? changelogLen : end;
    }

    void setEnd(Task task, long end) {
        write(changelogs.resolve(fileName(task)), end);
    }

    /** This worker's checkpoint of {@code task} (0 if it has none). */
    long checkpoint(Task task) {
        Long offset = read(checkpoints.resolve(fileName(task)));
        return offset == null ? 0 : offset;
    }

    void setCheckpoint(Task task, long offset) {
        write(checkpoints.resolve(fileName(task)), offset);
    }

    private static String fileName(Task task) {
        return task.topic() + "-" + task.partition();
    }

    private static Long read(Path path) {
        try {
            return Long.parseLong(Files.readString(path, StandardCharsets.UTF_8).trim());
        } catch (IOException | NumberFormatException e) {
            return null;
        }
    }

    /** Writes through a temporary file, so a reader never sees half a number. */
    private static void write(Path path, long value) {
        Path tmp = path.resolveSibling(path.getFileName() + ".tmp-" + ProcessHandle.current().pid());
        try {
            Files.writeString(tmp, Long.toString(value), StandardCharsets.UTF_8);
            Files.move(tmp, path, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
            throw new UncheckedIOException("writing " + path, e);
        }
    }
}
