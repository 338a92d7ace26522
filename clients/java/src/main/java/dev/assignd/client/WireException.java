package dev.assignd.client;

/** A JSON body that does not read as the protocol says. */
public final class WireException extends Exception {
    private static final long serialVersionUID = 1L;

    public WireException(String message) {
        super(message);
    }
}
