"""``python -m sptool`` and the ``sptool`` script.

What the script sets up here holds for its own process only, never for a process that imports
sptool (the Python API, a test's CliRunner)."""

import os
import signal


def _interrupted(signum, frame):
    # Ctrl-C or SIGTERM while the command line is still loading (numpy, pyarrow): nothing has
    # been written yet, so leave at once, as an interrupted command does, without a traceback.
    os.write(2, b"sptool: interrupted; no output was written\n")
    os._exit(130)


def run():
    signal.signal(signal.SIGINT, _interrupted)
    signal.signal(signal.SIGTERM, _interrupted)
    # Before anything imports numpy (importing sptool.cli does): cli.main sets the same, too late
    # for this script, whose OpenBLAS pool then took 20-26 ms of CPU a run (perf, reduce and add).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from .cli._without_pandas import keep_pandas_out

    keep_pandas_out()  # before pyarrow loads: about half a CPU-second a command (docs/performance.md)
    from .cli import main

    main()


if __name__ == "__main__":
    run()
