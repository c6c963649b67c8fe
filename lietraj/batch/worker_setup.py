"""What the workers of ``local_cluster`` run as they start (Dask's ``preload``).

They ignore Ctrl-C (SIGINT), which a terminal sends to every process of the command, so that the command alone
handles it (it stops the batch, keeps the rows finished and closes the workers) instead of each worker printing its
own KeyboardInterrupt traceback. And they drop the report of a heartbeat cut by the scheduler's closing: the
scheduler of a local cluster lives in the command's process, so its connection closes only as the command closes
the cluster, and a heartbeat in flight then (distributed 2026.8 sends one every second or so) logged its
CommClosedError with a traceback after an interrupted sweep."""

import logging
import signal


class _ClosedSchedulerHeartbeat(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not (type(error).__name__ == "CommClosedError" and "during heartbeat" in record.getMessage())


def dask_setup(worker) -> None:
    """Called by Dask in the worker process's main thread, before its first task."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.getLogger("distributed.worker").addFilter(_ClosedSchedulerHeartbeat())
