"""Read the next batch on a second thread while the caller works on the current one.

pyarrow decodes Parquet with the GIL released and the kernels release it too, so the two
cores overlap decode and compute.  At most ``depth`` batches wait in the queue, which is part
of the --memory accounting in sptool/_memory.py.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator

_DONE = object()


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
        # Drain so a producer blocked on put() can see the stop flag and exit.
        while thread.is_alive():
            try:
                q.get(timeout=0.05)
            except queue.Empty:
                pass
        thread.join()
