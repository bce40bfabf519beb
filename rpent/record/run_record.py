"""RunRecord: one run's record as its entry point holds it.

Every entry point (`rpent run`, `rpent serve-mcp`, each dashboard task, each `rpent eval` episode,
the ROS toolkit node and planner node) opens one before it starts anything: `RunRecord.open` claims
the next segment of the record in the directory, or refuses it (RecordError, one line naming the
option and the rule). The entry point then writes its own files through it: run.log, transcript.json
and result.json (segment N: transcript-N.json, result-N.json), atomically. The toolkit it builds next
for the same directory attaches to that claim and writes steps.jsonl, images/, the video and the
recipe (rpent.record.segments).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rpent.record.atomic import write_json
from rpent.record.run_log import RunLog
from rpent.record.segments import Segment, adopt_segment, open_segment

STEPS_FILE = "steps.jsonl"
RESULT_FILE = "result.json"
TRANSCRIPT_FILE = "transcript.json"


class RunRecord:
    """The segment this run claimed in `output_dir`, and the writers of the files the entry point writes."""

    def __init__(self, segment: Segment) -> None:
        self.segment = segment
        self.output_dir: Path = segment.output_dir
        #: The segment number: 1 for a new record, N for the (N-1)th --resume.
        self.number: int = segment.number
        #: steps.jsonl, shared by every segment (each line carries its segment).
        self.steps_file = self.output_dir / STEPS_FILE
        #: result.json of this segment (result-N.json in segment N).
        self.result_file = segment.file(RESULT_FILE)

    @classmethod
    def open(cls, output_dir: str | Path, *, resume: bool = False, option: str = "--output-dir",
             resume_option: str | None = "--resume") -> RunRecord:
        """Claim the next segment in `output_dir` (a new or empty directory; with `resume`, a record
        to continue); RecordError otherwise, naming `option` (and `resume_option`) as the user types them."""
        return cls(open_segment(output_dir, resume=resume, option=option, resume_option=resume_option))

    @classmethod
    def adopt(cls, output_dir: str | Path, *, option: str = "output_dir") -> RunRecord:
        """Take over the open claim another process made on `output_dir` (see adopt_segment)."""
        return cls(adopt_segment(output_dir, option=option))

    def file(self, filename: str) -> Path:
        """This segment's file of that name: `result.json` in segment 1, `result-2.json` in segment 2."""
        return self.segment.file(filename)

    def write_transcript(self, transcript: Any) -> Path:
        """The planner conversation (images as file paths), atomically."""
        path = self.segment.file(TRANSCRIPT_FILE)
        write_json(path, transcript)
        return path

    def write_result(self, summary: dict[str, Any]) -> Path:
        """result.json: how the run ended; written last, atomically (a record is complete once it parses)."""
        write_json(self.result_file, summary)
        return self.result_file

    def run_log(self) -> RunLog:
        """From now until its close() (or the end of a `with` block), everything logged also goes to
        run.log, after this segment's header."""
        return RunLog(self.segment)

    def __repr__(self) -> str:
        return f"RunRecord({str(self.output_dir)!r}, segment={self.number})"
