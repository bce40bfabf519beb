"""steps.jsonl: one line per tool call, appended and flushed as each call ends, so a killed run keeps
every call that completed.

Every line is strict JSON in UTF-8 and at most MAX_LINE_BYTES; how values JSON cannot carry and
fields too long for a line are written is described in rpent.record.step_line. Saved fields go to the
folder named after the log (`steps/` beside `steps.jsonl`), one file per field, never overwritten.
Each line starts with the record segment it belongs to (`"segment": 1` unless the run continued a
record; see rpent.record.segments).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

from rpent.record.step_line import (
    MAX_FIELD_BYTES,
    MAX_LINE_BYTES,
    TRUNCATED,
    encode_line,
    field_file_stem,
    reduced_line,
)
from rpent.record.step_record import StepRecord
from rpent.record.values import describe_exception

__all__ = ["MAX_FIELD_BYTES", "MAX_LINE_BYTES", "StepLog", "read_steps", "saved_value"]

log = logging.getLogger(__name__)


class StepLog:
    """steps.jsonl of one segment, open for appending: one line per StepRecord."""

    def __init__(self, path: Path, *, segment: int = 1) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.segment = segment
        self.fields_dir = path.with_suffix("")  # steps.jsonl -> steps/
        self._lock = threading.Lock()
        self._file = open(path, "ab")  # noqa: SIM115 - lives as long as the toolkit
        if self._file.tell() > 0 and not _ends_with_newline(path):
            # A crash mid-write left a torn line; end it so the next record starts a line of its own.
            self._write(b"\n")

    def append(self, step: StepRecord) -> None:
        """Write the step's line (a reduced one if it cannot be encoded in full); never raises."""
        try:
            record = {"segment": self.segment, **step.line()}
        except Exception as exc:  # e.g. times that are not numbers: the step still gets its line
            fields = {name: getattr(step, name, None) for name in ("call_id", "tool", "started_at", "ended_at", "error")}
            self.append_reduced(fields, f"the record could not be assembled: {describe_exception(exc)}")
            return
        self._write_line(encode_line(record, lambda name, text: self._save_field(record, name, text)))

    def append_reduced(self, record: dict[str, Any], reason: str) -> None:
        """Write the reduced line of `record` (for a record that could not even be assembled)."""
        self._write_line(reduced_line({"segment": self.segment, **record}, reason))

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.close()

    def _write_line(self, line: bytes) -> None:
        try:
            self._write(line + b"\n")
        except Exception:  # a full disk must not break the robot loop; say so loudly
            log.exception("could not append to %s", self.path)

    def _write(self, data: bytes) -> None:
        with self._lock:
            if self._file.closed:
                # A call that ends after close (it outlived close's timeout) still gets its line.
                with open(self.path, "ab") as late:
                    _write_durably(late, data)
                return
            _write_durably(self._file, data)

    def _save_field(self, record: dict[str, Any], name: str, text: bytes) -> str:
        self.fields_dir.mkdir(exist_ok=True)
        stem = field_file_stem(record.get("call_id"), name, self.segment)
        for attempt in range(1000):
            # A second log in the folder (a record written by an older RPent) may have used the name.
            file = self.fields_dir / (f"{stem}.json" if attempt == 0 else f"{stem}.{attempt}.json")
            try:
                handle = open(file, "xb")  # noqa: SIM115 - exclusive: an earlier segment's file is never replaced
            except FileExistsError:
                continue
            with handle:
                _write_durably(handle, text)
            return f"{self.fields_dir.name}/{file.name}"
        raise FileExistsError(f"{self.fields_dir}: 1000 files named {stem}*.json already")


def _write_durably(handle: Any, data: bytes) -> None:
    handle.write(data)
    handle.flush()
    os.fsync(handle.fileno())


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) == b"\n"


def read_steps(path: Path) -> list[dict[str, Any]]:
    """Read a steps.jsonl, ignoring a torn line left by a crash mid-write."""
    records = []
    for line in Path(path).read_bytes().splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return records


def saved_value(log_path: Path, value: Any) -> Any:
    """The full value behind a `{"__truncated__": ...}` field of a line of `log_path`; other values as they are.

    Raises FileNotFoundError when nothing was saved (the marker's "reason" says why).
    """
    if not (isinstance(value, dict) and TRUNCATED in value):
        return value
    name = value[TRUNCATED]
    if not isinstance(name, str):
        raise FileNotFoundError(f"nothing was saved for this field: {value.get('reason', 'no reason given')}")
    return json.loads((Path(log_path).parent / name).read_bytes())
