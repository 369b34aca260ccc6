"""Background extraction: a bounded queue and one daemon thread running jobs in submission order.

A failed job is logged and kept; ``wait`` re-raises it, so background errors are never lost
silently. A full queue blocks ``submit`` up to ``put_timeout_s`` and then raises. The worker
starts on first use; a job is any operation (``extraction.process_op`` bound to its inputs).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from ..effects import Op, run_sync
from ..errors import AgentMemoryError, ModelError

log = logging.getLogger(__name__)
Job = tuple[str, Callable[[], Op[None]]]
"""A label for the log (the thread id) and a factory of the operation to run."""


class ExtractionQueueFull(AgentMemoryError):
    """The background extraction queue stayed full for the whole put timeout."""


class ExtractionWorker:
    """The queue and its thread (see module docstring)."""

    def __init__(self, maxsize: int = 128, put_timeout_s: float = 300.0) -> None:
        self.queue: queue.Queue[Job | None] = queue.Queue(maxsize=maxsize)
        self.put_timeout_s = put_timeout_s
        self.errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, name="agentmemory-extraction", daemon=True)
        self._thread.start()

    def submit(self, job: Job) -> None:
        """Enqueue one job."""
        try:
            self.queue.put(job, timeout=self.put_timeout_s)
        except queue.Full:
            raise ExtractionQueueFull(f"extraction queue full for {self.put_timeout_s}s") from None

    def _run(self) -> None:
        while True:
            job = self.queue.get()
            try:
                if job is None:
                    return
                run_sync(job[1]())
            except BaseException as exc:  # noqa: BLE001 - kept and re-raised by wait()
                log.error("background extraction failed for thread %s: %s", job[0] if job else "?", exc)
                self.errors.append(exc)
            finally:
                self.queue.task_done()

    def wait(self, timeout: float | None) -> bool:
        """Wait until the queue is drained; raise the first background error (then clear)."""
        done = threading.Event()

        def joiner() -> None:
            self.queue.join()
            done.set()

        threading.Thread(target=joiner, daemon=True).start()
        finished = done.wait(timeout)
        self._raise_collected()
        return finished

    def stop(self, timeout: float | None) -> None:
        """Finish queued jobs and end the worker thread; raise a failure nobody collected."""
        self.queue.put(None)
        self._thread.join(timeout)
        self._raise_collected()

    def _raise_collected(self) -> None:
        if self.errors:
            first, self.errors = self.errors[0], []
            raise ModelError(f"background extraction failed: {first}") from first


class BackgroundExtraction:
    """One client's background worker, started on the first submitted job."""

    def __init__(self) -> None:
        self._worker: ExtractionWorker | None = None
        self._lock = threading.Lock()

    def submit(self, label: str, job: Callable[[], Op[None]]) -> None:
        """Queue ``job`` (starting the worker if needed)."""
        with self._lock:
            if self._worker is None:
                self._worker = ExtractionWorker()
            worker = self._worker
        worker.submit((label, job))

    def wait(self, timeout: float | None) -> bool:
        """True once every queued job is done (False after ``timeout``); re-raises a failure."""
        worker = self._worker
        return True if worker is None else worker.wait(timeout)

    def stop(self, timeout: float | None) -> None:
        """Finish queued jobs (up to ``timeout``) and end the worker."""
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.stop(timeout)
