"""The record's stream (rpent.record.stream): what it writes, what a reader gets back, and what a SIGKILL leaves."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from rpent.record.stream import StreamError, StreamWriter, read_stream, stream_segments

HEADER = {"hz": 15.0, "robot": "test", "task": "stack", "cameras": [
    {"name": "front", "width": 64, "height": 48, "role": "exterior", "arm": None},
    {"name": "wrist", "width": 32, "height": 24, "role": "wrist", "arm": "arm"}]}


def picture(i: int, h: int, w: int) -> np.ndarray:
    """A picture that says which sample it is: a bright square whose place moves with i."""
    rgb = np.full((h, w, 3), 40, dtype=np.uint8)
    x = (i * 4) % (w - 8)
    rgb[4:12, x:x + 8] = (230, 200, 30)
    return rgb


def sample(i: int) -> dict:
    return {"t": round(i / 15, 4), "wall": 0.0, "calls": [[1, "move_to"]], "arms": {"arm": {"q": [i * 0.01] * 7}}}


def write(folder: Path, n: int, segment: int = 1) -> None:
    writer = StreamWriter(folder, segment, HEADER)
    for i in range(n):
        assert writer.add(sample(i), {"front": picture(i, 48, 64), "wrist": picture(i, 24, 32)})
    writer.close()


def test_every_sample_reads_back_with_its_pictures(tmp_path):
    write(tmp_path, 40)
    stream = read_stream(tmp_path)
    assert stream.header == {"format": "rpent-stream/1", **HEADER, "segment": 1}
    assert [s["i"] for s in stream.samples] == list(range(40))
    assert stream.samples[7]["arms"]["arm"]["q"] == [0.07] * 7
    for camera, (h, w) in (("front", (48, 64)), ("wrist", (24, 32))):
        frames = list(stream.frames(camera))
        assert len(frames) == 40
        for i in (0, 13, 39):
            assert np.abs(frames[i].astype(int) - picture(i, h, w).astype(int)).mean() < 3, (camera, i)
            assert np.abs(frames[i].astype(int) - picture(i + 3, h, w).astype(int)).mean() > 5, (camera, i)


def test_a_resumed_segment_writes_its_own_files(tmp_path):
    write(tmp_path, 5)
    write(tmp_path, 8, segment=2)
    assert stream_segments(tmp_path) == [1, 2]
    assert sorted(p.name for p in (tmp_path / "stream").iterdir()) == [
        "front-2.mp4", "front.mp4", "samples-2.jsonl", "samples.jsonl", "wrist-2.mp4", "wrist.mp4"]
    assert len(read_stream(tmp_path, 2).samples) == 8
    assert read_stream(tmp_path, 2).header["segment"] == 2


def test_a_sample_without_every_cameras_picture_is_refused(tmp_path):
    writer = StreamWriter(tmp_path, 1, HEADER)
    with pytest.raises(ValueError, match=r"stream sample: no frame from camera\(s\) \['wrist'\]"):
        writer.add(sample(0), {"front": picture(0, 48, 64)})
    writer.close()


def test_what_is_not_a_stream_is_one_line(tmp_path):
    with pytest.raises(StreamError, match=r"samples.jsonl: no such file \(the run recorded no stream"):
        read_stream(tmp_path)
    (tmp_path / "stream").mkdir()
    (tmp_path / "stream" / "samples.jsonl").write_text('{"hz": 15}\n')
    with pytest.raises(StreamError, match=r"samples.jsonl: line 1 is not a rpent-stream/1 header$"):
        read_stream(tmp_path)


WRITER = """
import sys, time
import numpy as np
from pathlib import Path
sys.path.insert(0, {test!r})
from test_stream_record import HEADER, picture, sample
from rpent.record.stream import StreamWriter
writer = StreamWriter(Path({out!r}), 1, HEADER)
i = 0
while True:
    writer.add(sample(i), {{"front": picture(i, 48, 64), "wrist": picture(i, 24, 32)}})
    i += 1
    print(i, flush=True)  # samples handed to the writer
    time.sleep(1 / 15)
"""


def test_a_sigkill_loses_at_most_the_samples_of_the_last_second(tmp_path):
    script = WRITER.format(test=str(Path(__file__).parent), out=str(tmp_path))
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    lines = tmp_path / "stream" / "samples.jsonl"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if lines.exists() and len(lines.read_text().splitlines()) > 45:  # 3 s of samples
                break
            assert process.poll() is None, process.stderr.read()
            time.sleep(0.02)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)
    finally:
        if process.poll() is None:
            process.kill()
    handed = int(process.stdout.read().split()[-1])
    written = [json.loads(line) for line in lines.read_text().splitlines()[1:] if line.endswith("}")]
    stream = read_stream(tmp_path)
    # Every whole line has its pictures (a line is written after them); the killed one at most is cut;
    # and of the samples handed over, at most the last second's (15) were not yet written.
    assert len(stream.samples) >= len(written) - 1 >= 44
    assert len(stream.samples) >= handed - 15, (len(stream.samples), handed)
    frames = list(stream.frames("front"))
    last = len(stream.samples) - 1
    assert np.abs(frames[last].astype(int) - picture(last, 48, 64).astype(int)).mean() < 3
