"""Each test file that places franky-sim on addresses of its own claims a range no other file claims
(test/sim_process.free_sim_hosts): scripts/test.sh runs two files at a time, and two simulated arms on one
address and port collide. test/ros runs one file at a time (scripts/test_ros.sh), so its files may share."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

TEST = Path(__file__).resolve().parent
CLAIM = re.compile(r"free_sim_hosts\((\d+), (\d+)|SIM_HOSTS = \((\d+), (\d+)\)")


def claims() -> dict[str, list[tuple[int, int]]]:
    found: dict[str, list[tuple[int, int]]] = {}
    for path in sorted(TEST.rglob("test_*.py")):
        if "ros" in path.relative_to(TEST).parts[:1]:
            continue
        for match in CLAIM.finditer(path.read_text()):
            first, last = (int(g) for g in match.groups() if g is not None)
            found.setdefault(str(path.relative_to(TEST)), []).append((first, last))
    return found


def test_no_two_test_files_claim_the_same_franky_sim_addresses():
    ranges = claims()
    assert len(ranges) >= 3, ranges  # the search still finds the claims
    for (a, a_ranges), (b, b_ranges) in itertools.combinations(ranges.items(), 2):
        for (a1, a2), (b1, b2) in itertools.product(a_ranges, b_ranges):
            assert a2 < b1 or b2 < a1, f"{a} claims 127.0.0.{a1}-{a2} and {b} 127.0.0.{b1}-{b2}"
