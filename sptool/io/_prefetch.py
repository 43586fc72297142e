"""Read the next batch on a second thread while the caller works on the current one.

pyarrow decodes Parquet with the GIL released and the kernels release it too, so the two
cores overlap decode and compute.  At most ``depth`` batches wait in the queue, which is part
of the --memory accounting in sptool/_memory.py.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterable, Iterator

_DONE = object()
ABANDON_AFTER = 1.0  # seconds a stopped producer gets to finish its current item


def prefetch(items: Iterable, depth: int = 1) -> Iterator:
    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce():
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        q.put((True, item), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put((True, _DONE))
        except BaseException as e:  # handed to the consumer, raised there
            q.put((False, e))

    thread = threading.Thread(target=produce, name="sptool-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            ok, item = q.get()
            if not ok:
                raise item
            if item is _DONE:
                return
            yield item
    finally:
        stop.set()
        # Drain so a producer blocked on put() can see the stop flag and exit.  A producer
        # blocked in a read (a pipe whose writer has paused) may never see it: after a grace
        # period it is left behind, a daemon whose batches nobody takes, so Ctrl-C and an early
        # close never wait on the input.
        deadline = time.monotonic() + ABANDON_AFTER
        while thread.is_alive() and time.monotonic() < deadline:
            try:
                q.get(timeout=0.05)
            except queue.Empty:
                pass
