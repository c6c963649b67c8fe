"""What the workers of ``local_cluster`` run as they start (Dask's ``preload``): they ignore Ctrl-C (SIGINT), which a
terminal sends to every process of the command, so that the command alone handles it (it stops the batch, keeps
the rows finished and closes the workers) instead of each worker printing its own KeyboardInterrupt traceback."""

import signal


def dask_setup(worker) -> None:
    """Called by Dask in the worker process's main thread, before its first task."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
