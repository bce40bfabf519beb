"""run.log in the record: everything logged while the run's record is open, every segment after a
header of its own (appended, never rewritten), and failures an entry point writes there itself."""

from __future__ import annotations

import logging
import os
import sys
import time
import traceback
from pathlib import Path
from types import TracebackType

from rpent.record.segments import Segment

RUN_LOG = "run.log"
#: Set on the handler writing a run.log: consoles then leave tracebacks to it (rpent.runner.logs).
RUN_LOG_MARK = "_rpent_run_log"

log = logging.getLogger(__name__)


class RunLog:
    """Everything logged in this process (the root logger, DEBUG and up) goes to the record's run.log
    from its creation until close(); usable as a context manager too. Opens with the segment's header."""

    def __init__(self, segment: Segment) -> None:
        # backslashreplace: a line carrying text UTF-8 cannot (a lone surrogate a model sent) is written
        # with it escaped, not dropped.
        handler = logging.FileHandler(segment.output_dir / RUN_LOG, encoding="utf-8", errors="backslashreplace")
        resumed = " (continued with --resume)" if segment.number > 1 else ""
        handler.stream.write(f"===== segment {segment.number}{resumed}, started {time.strftime('%Y-%m-%d %H:%M:%S')}, "
                             f"pid {os.getpid()} =====\n")
        handler.flush()
        handler.setLevel(logging.DEBUG)
        handler.setFormatter(logging.Formatter("%(asctime)s.%(msecs)03d %(levelname)s %(name)s: %(message)s",
                                               "%Y-%m-%d %H:%M:%S"))
        handler._rpent = True  # type: ignore[attr-defined]
        setattr(handler, RUN_LOG_MARK, True)
        logging.getLogger().addHandler(handler)
        self.handler = handler

    def close(self) -> None:
        logging.getLogger().removeHandler(self.handler)
        self.handler.close()

    def __enter__(self) -> RunLog:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def run_log_attached() -> bool:
    """Whether a run.log takes this process's logging now."""
    return any(getattr(h, RUN_LOG_MARK, False) for h in logging.getLogger().handlers)


def append_failure(output_dir: Path, message: str, logger: str) -> Path:
    """The failure, and the traceback being handled if any, at the end of the record's run.log (the
    record only grows; a run that logged its own traceback there needs no second one). Returns the file."""
    log_file = output_dir / RUN_LOG
    try:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        with log_file.open("a", encoding="utf-8") as handle:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S")
            handled = traceback.format_exc() if sys.exc_info()[0] is not None else ""
            handle.write(f"{stamp} ERROR {logger}: {message}\n{handled}")
    except OSError as exc:
        log.error("cannot write %s: %s", log_file, exc)
    return log_file
