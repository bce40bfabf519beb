"""How an episode's frames come from its stream (rpent.dataset.episodes.resample), and DROID's units."""

from __future__ import annotations

import numpy as np

from robots.franka.policy import droid
from rpent.dataset import conventions
from rpent.dataset.episodes import resample


def test_at_the_streams_rate_every_sample_is_a_frame_even_when_late():
    # A late sample (0.2) and a step 15 ms after a timer sample (0.40, 0.415) are frames of their own:
    # each policy step the arm ran stays one frame.
    times = [0.0, 0.0667, 0.2, 0.2667, 0.333, 0.40, 0.415, 0.4817]
    assert resample(times, 15.0, None).tolist() == list(range(8))


def test_another_fps_takes_the_nearest_sample_on_a_grid_per_stretch():
    times = np.array([0.0, 0.0667, 0.1333, 0.2, 5.0, 5.0667, 5.1333])  # a pause between calls: two stretches
    doubled = resample(times, 15.0, 30.0)
    grid = np.r_[np.arange(7) / 30, 5.0 + np.arange(5) / 30]
    assert len(doubled) == 12 and np.all(np.abs(times[doubled] - grid) <= 1 / 30 + 1e-9)
    assert sorted(set(doubled.tolist())) == list(range(7))  # nothing dropped
    # Half the rate: every other sample, from each stretch's first (the grid rounds up past its end).
    assert resample(times, 15.0, 7.5).tolist() == [0, 2, 3, 4, 6]


def test_droids_units_are_the_policy_clients():
    """The dataset's actions are in the units the policy client turns into motion (0.2 rad per 15 Hz step)."""
    assert conventions.DROID_JOINT_DELTA_RAD == droid.MAX_JOINT_DELTA_RAD
    assert conventions.DROID_CONTROL_HZ == droid.CONTROL_HZ
    assert np.isclose(conventions.DROID_JOINT_DELTA_RAD * conventions.DROID_CONTROL_HZ, 3.0)
