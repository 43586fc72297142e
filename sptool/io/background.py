"""A writer that runs on a second thread, so encoding the output overlaps the next batch's work."""

from __future__ import annotations

import numpy as np

from ._atomic import ClosesOrAborts


class Background(ClosesOrAborts):
    """Runs a writer's ``method`` calls on a second thread, so that encoding the output
    overlaps reading and reducing the next batch (at most ``depth`` calls wait).  An error on
    that thread is raised again by the next call or by ``close``."""

    def __init__(self, inner, method: str = "write", depth: int = 2):
        import queue
        import threading

        self.inner = inner
        self.method = getattr(inner, method)
        self.q = queue.Queue(maxsize=depth)
        self.error = None
        # Set when the thread has finished, and waited on instead of Thread.join: a join cut
        # short by Ctrl-C can leave the thread marked as stopped while it still writes, and
        # abort() would then remove the output under it.
        self.done = threading.Event()
        self._stop_sent = False
        self.thread = threading.Thread(target=self._run, name="sptool-writer", daemon=True)
        self.thread.start()

    def _run(self):
        try:
            while True:
                item = self.q.get()
                if item is None:
                    return
                if self.error is None:
                    try:
                        self.method(*item)
                    except BaseException as e:  # raised again on the caller's thread
                        self.error = e
        finally:
            self.done.set()

    def write(self, *args):
        """Queue one call; returns the number of rows (for keys, values calls)."""
        if self.error is not None:
            raise self.error
        self.q.put(args)
        return args[0].shape[1] if isinstance(args[0], np.ndarray) else args[0].num_rows

    def _join(self):
        if not self._stop_sent:
            self.q.put(None)
            self._stop_sent = True
        self.done.wait()

    def close(self):
        self._join()
        if self.error is not None:
            raise self.error
        return self.inner.close()

    def abort(self):
        if not self.done.is_set():
            self.error = self.error or RuntimeError("aborted")
            self._join()
        self.inner.abort()


