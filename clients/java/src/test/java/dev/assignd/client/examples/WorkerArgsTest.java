package dev.assignd.client.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.Map;
import org.junit.jupiter.api.Test;

class WorkerArgsTest {

    @Test
    void theEndpointAndRepeatedMetadataAreRead() {
        WorkerArgs args = WorkerArgs.parse(new String[] {"--group", "g", "--topics", "orders", "--endpoint",
            "http://10.0.0.5:8080", "--metadata", "zone=a", "--metadata=version=1.4=rc", "--metadata", "empty="},
                Map.of());
        assertEquals("http://10.0.0.5:8080", args.endpoint());
        assertEquals(Map.of("zone", "a", "version", "1.4=rc", "empty", ""), args.metadata());
        assertEquals(null, WorkerArgs.parse(new String[] {"--group", "g", "--topics", "o"}, Map.of()).endpoint());
        assertThrows(IllegalArgumentException.class, () -> WorkerArgs.parse(new String[] {"--group", "g",
            "--topics", "o", "--metadata", "zone"}, Map.of()));
        assertThrows(IllegalArgumentException.class, () -> WorkerArgs.parse(new String[] {"--group", "g",
            "--topics", "o", "--metadata", "=a"}, Map.of()));
    }
}
