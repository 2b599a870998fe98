"""The Trio core: the connection and its parts (the reader loop over the
sans-IO peer's events, the incoming-request runner and eager handlers, the
ordering of notifications, outgoing calls and cancels), the per-request
objects, the outbox, and the frame transports (NDJSON over byte streams,
whole-message streams)."""
