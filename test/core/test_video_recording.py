"""Episode video and clips as a player sees them: while still being written (what a crash leaves) and after a clean close.

The files are read with the real ffprobe (see test/video_probe.py), never through the writer.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from video_probe import probe

from rpent.record.video import FragmentedMp4, VideoRecorder

# What a crash may cost: the frames of the last second (the README's promise).
MAX_LOST_S = 1.0


def scene(i: int, size: tuple[int, int] = (120, 160)) -> np.ndarray:
    """A static table with a square moving across it: little changes from frame to frame, like a robot scene."""
    image = np.full((*size, 3), 220, np.uint8)
    x = (i * 3) % (size[1] - 20)
    image[40:60, x:x + 20] = (200, 30, 30)
    return image


@pytest.mark.parametrize("fps", [3.0, 10.0, 30.0, 50.0])  # 3: the franka default, 50: the toy
@pytest.mark.parametrize("seconds", [1.5, 4.0])
def test_a_video_still_being_written_plays_up_to_its_last_second(tmp_path: Path, fps: float, seconds: float) -> None:
    # The writer stays open and then idle, as when the process is killed between two motions:
    # everything a player can read now is what a SIGKILL would leave on disk.
    path = tmp_path / "episode.mp4"
    writer = FragmentedMp4(path, 160, 120)
    count = int(seconds * fps) + 1
    for i in range(count):
        writer.add(scene(i), 100.0 + i / fps)
    recorded_s = (count - 1) / fps
    seen = probe(path)
    assert seen.playable, f"{fps} frames/s for {recorded_s:.2f} s: no playable video in the open file ({path.stat().st_size} B)"
    assert recorded_s - seen.last_s <= MAX_LOST_S, f"open file covers {seen.last_s:.2f} of {recorded_s:.2f} s"
    assert seen.frames == seen.packets  # nothing on disk is damaged
    writer.close()


def test_a_closed_video_holds_every_frame_at_its_time(tmp_path: Path) -> None:
    path = tmp_path / "episode.mp4"
    writer = FragmentedMp4(path, 160, 120)
    times = [0.0, 0.02, 0.05, 0.5, 0.52, 2.0, 2.1]  # uneven, with pauses: timestamps follow the wall clock
    for i, t in enumerate(times):
        writer.add(scene(i), 50.0 + t)
    writer.close()
    seen = probe(path)
    assert (seen.frames, seen.packets) == (len(times), len(times))
    assert seen.last_s == pytest.approx(times[-1], abs=0.002)


def test_odd_sized_frames_are_scaled_to_even_and_recorded(tmp_path: Path) -> None:
    path = tmp_path / "episode.mp4"
    writer = FragmentedMp4(path, 161, 121)
    for i in range(5):
        writer.add(scene(i, (121, 161)), i / 30)
    writer.close()
    assert probe(path).frames == 5


def test_recorder_close_leaves_the_episode_and_every_clip_complete(tmp_path: Path) -> None:
    recorder = VideoRecorder(tmp_path, clips=True)
    for i in range(40):
        recorder.add(scene(i), clip="00002_move_to")
    recorder.end_clip("00002_move_to")
    for i in range(25):
        recorder.add(scene(i), clip="00003_move_to")
    recorder.add(scene(0))  # a frame outside any clip still belongs to the episode
    # The second clip is still open at close: close finishes it too.
    episode = recorder.close()
    assert episode == recorder.episode_path
    assert probe(episode).frames == 66
    first, second = recorder.clip_path("00002_move_to"), recorder.clip_path("00003_move_to")
    assert first is not None and second is not None
    assert (probe(first).frames, probe(second).frames) == (40, 25)
    assert recorder.dropped == 0


def test_recorder_without_frames_writes_no_video(tmp_path: Path) -> None:
    recorder = VideoRecorder(tmp_path, clips=True)
    assert recorder.close() is None
    assert not list(tmp_path.iterdir())


def test_views_of_several_cameras_become_one_labelled_grid_whose_layout_the_first_frame_fixes(tmp_path: Path) -> None:
    import av

    recorder = VideoRecorder(tmp_path)
    red, green, blue = (np.full((120, 160, 3), colour, np.uint8) for colour in ((200, 0, 0), (0, 200, 0), (0, 0, 200)))
    recorder.add({"front": red, "top": green, "wrist": blue})
    recorder.add({"top": blue})  # front and wrist keep their last picture
    recorder.add({"front": red, "elbow": green})  # a camera the first frame did not have is left out
    path = recorder.close()
    assert path is not None
    with av.open(str(path)) as container:
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    assert len(frames) == 3 and frames[0].shape == (240, 320, 3)  # 2 x 2 tiles of 160 x 120
    def tile(frame: np.ndarray, index: int) -> np.ndarray:  # below its label
        row, column = divmod(index, 2)
        return frame[row * 120 + 40 : (row + 1) * 120, column * 160 : (column + 1) * 160].reshape(-1, 3).mean(axis=0)
    assert np.allclose(tile(frames[0], 0), (200, 0, 0), atol=12) and np.allclose(tile(frames[0], 1), (0, 200, 0), atol=12)
    assert np.allclose(tile(frames[1], 1), (0, 0, 200), atol=12) and np.allclose(tile(frames[1], 2), (0, 0, 200), atol=12)
    assert np.allclose(tile(frames[2], 1), (0, 0, 200), atol=12)  # not the unknown elbow camera's green
    label = frames[0][:14, :30]  # "front", white on black, over its tile's top-left corner
    assert (label.min(axis=2) > 200).any() and (label.max(axis=2) < 40).mean() > 0.5
