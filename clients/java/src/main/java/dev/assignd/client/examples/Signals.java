package dev.assignd.client.examples;

import java.util.concurrent.atomic.AtomicInteger;
import sun.misc.Signal;

/**
 * SIGTERM and SIGINT handling. A shutdown hook cannot do it: the JVM is
 * already exiting when the hook runs, with its exit status set, and ignores a
 * second signal. {@code sun.misc.Signal} (module {@code jdk.unsupported}) lets
 * the worker drain first and exit 0; javac warns that it is internal API.
 */
final class Signals {

    private Signals() {
    }

    /** Runs {@code first} on the first SIGTERM or SIGINT, {@code again} on every later one. */
    static void onTermination(Runnable first, Runnable again) {
        AtomicInteger count = new AtomicInteger();
        for (String name : new String[] {"TERM", "INT"}) {
            Signal.handle(new Signal(name), signal -> {
                boolean isFirst = count.incrementAndGet() == 1;
                System.err.println("worker: SIG" + signal.getName() + (isFirst ? ": draining" : " again: leaving now"));
                (isFirst ? first : again).run();
            });
        }
    }
}
