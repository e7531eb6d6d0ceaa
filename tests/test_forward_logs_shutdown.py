"""The log forwarder's shutdown is bounded by its timeout, whatever the downstream does."""

from __future__ import annotations

import socket
import threading
from collections import Counter

from otel_loopguard.receiver._forward_logs import LogForwarder


def test_a_downstream_that_never_answers_cannot_hold_the_shutdown() -> None:
    """The downstream accepts connections and never answers: the first request waits in its
    send, the queue fills. Before, the shutdown put its stop marker into the full queue and
    waited for ever; now it ends within its timeout and counts what it did not send."""
    silent = socket.create_server(("127.0.0.1", 0), backlog=16)  # never accepts, never answers
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()

    def count(outcome: str, records: int) -> None:
        with lock:
            outcomes[outcome] += records

    port = silent.getsockname()[1]
    forwarder = LogForwarder(f"http://127.0.0.1:{port}", "http", on_outcome=count, max_queue=2)
    try:
        for records in (1, 2, 3, 4, 5):
            forwarder.send(b"\x0a\x00", records)  # one sent (and stuck), two queued, the rest
        stopper = threading.Thread(target=forwarder.shutdown, kwargs={"timeout": 1.0},
                                   daemon=True)
        stopper.start()
        stopper.join(8.0)  # the send's own timeout is 10 s: well before it
        assert not stopper.is_alive()
        with lock:
            # every request but the one stuck in its send (1 record, counted when its own
            # timeout ends it) is accounted for: dropped by the full queue, or counted as
            # not forwarded by the shutdown
            assert outcomes["export_failed"] + outcomes["queue_full"] in (14, 15)
            assert outcomes["exported"] == 0
    finally:
        silent.close()
