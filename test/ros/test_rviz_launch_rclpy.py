"""rviz under the same rules: `dual_franka.launch.py use_sim:=true rviz:=true security:=true` on a virtual
screen, rviz in the read-only `monitor` enclave.

Judged as an operator would: rviz's own log holds no error of its displays or of the security layer;
every topic of an enabled display of config/rpent.rviz carries data that rviz (its node `rviz`, or for
TF its listener's node) reads; and
a screenshot shows a window of useful size, no image panel still saying "No Image", the arms' meshes
and the cameras' point clouds in the 3D view. Needs `../shared/ros/install.sh --with-rviz` and Xvfb.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("rclpy", reason="rclpy not importable: ROS 2 is not sourced")
pytest.importorskip("rpent.action", reason="rpent interfaces not generated: colcon build this package and source it")
if shutil.which("ros2") is None or shutil.which("rviz2") is None or shutil.which("Xvfb") is None:
    pytest.skip("rviz2 or Xvfb missing (../shared/ros/install.sh --with-rviz)", allow_module_level=True)

from PIL import Image, ImageGrab
from sim_process import free_sim_hosts

from .launch_process import Launch, client, environment, make_keystore

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.timeout(600)]
ROOT = Path(__file__).resolve().parents[2]
SCREEN = (1600, 1000)
RVIZ_NODES = ("rviz", "transform_listener_impl")  # rviz's own node, and the one its TF listener makes
# rviz logs these for what it cannot show: a display's topic, a mesh, a service or topic security refused.
BAD_LOG = ("failed to create", "Could not load resource", "incompatible QoS", "terminate called", "Status: Error",
           "process has died")


def display_topics() -> list[str]:
    """The topics of the enabled displays of config/rpent.rviz (TF reads /tf and /tf_static)."""
    config = yaml.safe_load((ROOT / "config" / "rpent.rviz").read_text())["Visualization Manager"]
    topics = []
    for display in config["Displays"]:
        if not display.get("Enabled", True):
            continue
        if display["Class"].endswith("/TF"):
            topics += ["/tf", "/tf_static"]
        for key in ("Topic", "Description Topic"):
            if key in display:
                topics.append(display[key]["Value"])
    return topics


class VirtualScreen:
    """Xvfb on a display number of its own."""

    def __init__(self) -> None:
        self.number = next(n for n in range(90, 200) if not Path(f"/tmp/.X11-unix/X{n}").exists()
                           and not Path(f"/tmp/.X{n}-lock").exists())
        self.proc = subprocess.Popen(["Xvfb", f":{self.number}", "-screen", "0", f"{SCREEN[0]}x{SCREEN[1]}x24",
                                      "-nolisten", "tcp"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline, pause = time.monotonic() + 30, threading.Event()
        while not Path(f"/tmp/.X11-unix/X{self.number}").exists():
            assert time.monotonic() < deadline and self.proc.poll() is None, "Xvfb did not start"
            pause.wait(0.1)

    @property
    def display(self) -> str:
        return f":{self.number}"

    def shot(self) -> Image.Image:
        return ImageGrab.grab(xdisplay=self.display)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def judge(shot: Image.Image) -> dict[str, object]:
    """What the screenshot shows: the window's size, white "No Image" placeholders, mesh and cloud pixels."""
    rgb = np.asarray(shot.convert("RGB")).astype(int)
    lit = np.argwhere(rgb.sum(axis=2) > 0)  # Xvfb's root window is black
    (top, left), (bottom, right) = lit.min(axis=0), lit.max(axis=0)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    # rviz's 3D view: its dark grey background is the largest region of one colour right of the docks.
    view = rgb[:, SCREEN[0] // 4:]
    background = (abs(view - 48).max(axis=2) <= 4)
    rows, cols = np.where(background)
    v_top, v_bottom, v_left, v_right = rows.min(), rows.max(), cols.min(), cols.max()
    inside = view[v_top:v_bottom, v_left:v_right]
    vr, vg, vb = inside[..., 0], inside[..., 1], inside[..., 2]
    mesh = (vr > 180) & (abs(vr - vg) < 12) & (abs(vg - vb) < 12)  # the FR3's white and grey links
    table = (vr > 170) & (vg > 120) & (vg < 200) & (vb < 150) & (vr - vb > 50)  # the table's points, wood-coloured
    # An image display without data draws a white panel with "No Image": long runs of pure white.
    # config/rpent.rviz stacks the three image panels in the top ~63% of the window, above the Displays panel,
    # whose tree and description box are white by design: only the image panels' rows are judged.
    panels = slice(top, top + int(0.63 * (bottom - top)))
    dock = (r[panels, : SCREEN[0] // 4] == 255) & (g[panels, : SCREEN[0] // 4] == 255) & (b[panels, : SCREEN[0] // 4] == 255)
    white_rows = int((dock.sum(axis=1) > 250).sum())
    return {"window": (int(right - left + 1), int(bottom - top + 1)), "view": inside.shape[1::-1],
            "mesh_fraction": float(mesh.mean()), "table_fraction": float(table.mean()), "white_rows": white_rows}


def test_rviz_in_the_monitor_enclave_shows_every_display_of_the_secured_launch(tmp_path):
    keystore = make_keystore(tmp_path / "keystore")
    screen = VirtualScreen()
    launch = None
    try:
        launch = Launch("dual_franka.launch.py", "use_sim:=true", f"sim_hosts:={','.join(free_sim_hosts(215, 224, 2))}",
                        f"output_dir:={tmp_path / 'run'}", "rviz:=true", "security:=true", f"keystore:={keystore}",
                        log=tmp_path / "launch.log", env=environment(DISPLAY=screen.display, LIBGL_ALWAYS_SOFTWARE="1"))
        launch.wait_for("tools served", 240)
        secured = environment(secured_by=keystore)
        # Motions while the probe listens, so the toolkit publishes the observation the "Last observation" panel
        # shows after the probe has subscribed (the topic is volatile: one published before is not seen).
        topics, moves, probing = display_topics(), [], threading.Event()

        def keep_moving() -> None:
            dz = 0.02
            while not probing.is_set():
                moves.append(client("call", "move_by", json.dumps({"arm": "left", "dz_m": dz}), env=secured,
                                    enclave="/rpent/planner", name="planner", timeout_s=60))
                dz = -dz

        mover = threading.Thread(target=keep_moving, daemon=True)
        mover.start()
        try:
            seen = client("displays", ",".join(topics), env=secured, enclave="/rpent/monitor", name="monitor_probe",
                          timeout_s=120, options=["--subscriber", ",".join(RVIZ_NODES)])
        finally:
            probing.set()
            mover.join(120)
        # At least one motion published its observation while the probe listened. Each one's own success is not
        # this test's question (test_launch_rclpy's is): with rviz rendering in software on the same two cores,
        # franky-sim runs several times slower than real time, and one of the back-to-back 2 cm moves was once
        # refused by franky's planner (error -101, a trajectory duration out of its range) under that load.
        assert any(moved.get("ok") is True for moved in moves), moves
        missing = {t: s for t, s in seen.items()
                   if not s["received"] or not any(n.startswith(RVIZ_NODES) for n in s["subscribers"])}
        assert not missing, missing
        # Rendering follows the data: judge fresh screenshots until they show it all (bounded).
        deadline, pause, verdict = time.monotonic() + 60, threading.Event(), {}
        while time.monotonic() < deadline:
            shot = screen.shot()
            verdict = judge(shot)
            if verdict["white_rows"] == 0 and verdict["mesh_fraction"] > 0.01 and verdict["table_fraction"] > 0.01:
                break
            pause.wait(0.5)
        shot.save(tmp_path / "rviz.png")
        print(f"rviz screenshot: {tmp_path / 'rviz.png'}: {verdict}")
        assert verdict["window"][0] >= 1500 and verdict["window"][1] >= 900, verdict  # not rviz's 690x590
        assert verdict["white_rows"] == 0, verdict  # every image panel shows a picture
        assert verdict["mesh_fraction"] > 0.01 and verdict["table_fraction"] > 0.01, verdict
        # rviz's own lines: launch tags them with its process name, "nice-N" since rviz runs under `nice -n 10`;
        # the process is the one that found the monitor enclave.
        lines = launch.text().splitlines()
        tags = {line.split("]", 1)[0] + "]" for line in lines
                if line.startswith("[") and "enclaves/rpent/monitor" in line and "Found security directory" in line}
        rviz_log = [line for line in lines if tags and line.startswith(tuple(tags))]
        assert rviz_log and not [line for line in rviz_log if any(bad in line for bad in BAD_LOG)], "\n".join(rviz_log)
        assert f"Found security directory: {keystore}/enclaves/rpent/monitor" in launch.text()
    finally:
        if launch is not None:
            launch.stop()
            print(launch.text()[-4000:])
        screen.close()
