"""A venv with lerobot, built from PyPI on first use, and a loader that reads a LeRobotDataset in it.

lerobot 0.6.x needs Python >= 3.12 (its code uses PEP 695 generics) and torch >= 2.7, < 2.12, so it
cannot live in the project's Python 3.11 venv, nor use the CPU torch 2.13.0 wheel on this disk (cp311,
and above lerobot's range). PyPI's only torch for cp312 on x86_64 is a CUDA build: the venv is 5.4 GB,
pip downloads ~2.2 GB, and a build from scratch took 85 s here. torch 2.11.0 is the smallest that worked
(2.7.1, lerobot's floor, came to 5.9 GB); without the nvidia-* wheels `import torch` fails (libcudnn.so.9).

`lerobot_python()` returns the venv's python, building it under a file lock into a temporary folder
beside the target and renaming it into place, so an interrupted build is never taken for a venv.
`load_dataset()` runs lerobot_load.py (beside this file) in that venv, offline, and returns its JSON.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

LEROBOT_VERSION = "0.6.1"
#: lerobot 0.6.x's Requires-Python is >= 3.12; the venv is built with the newest 3.12 found.
PYTHON_MINOR = (3, 12)

#: What the build asks pip for: lerobot without its "dataset" extra (that extra adds torchcodec, which
#: needs the system's FFmpeg libraries), plus the rest of that extra. Decoding is PyAV's.
REQUIREMENTS = (
    f"lerobot=={LEROBOT_VERSION}",
    "torch==2.11.0",
    "torchvision==0.26.0",
    "datasets==4.8.5",
    "pandas==2.3.3",
    "pyarrow==26.0.1",
    "av==15.1.0",
    "jsonlines==4.0.0",
    "numpy==2.2.6",
    "huggingface-hub==1.33.0",
)
#: Everything else pip resolved for REQUIREMENTS on 2026-12 (x86_64, CPython 3.12.1), as constraints: a
#: later release of a dependency cannot change the venv. On aarch64 torch pulls no nvidia-* wheels, and
#: a constraint on a package that is not installed is ignored.
CONSTRAINTS = (
    "aiohappyeyeballs==2.7.1", "aiohttp==3.14.5", "aiosignal==1.4.0", "anyio==4.16.0", "attrs==26.1.0",
    "certifi==2026.10.19.post1", "charset-normalizer==3.5.3", "click==8.5.1", "cloudpickle==3.1.3",
    "cmake==4.1.3", "cuda-bindings==13.5.0", "cuda-pathfinder==1.9.1", "cuda-toolkit==13.0.2", "dill==0.4.1",
    "draccus==0.11.6", "einops==0.8.2", "Farama-Notifications==0.0.6", "filelock==4.3.2", "frozenlist==1.8.0",
    "fsspec==2026.2.0", "gymnasium==1.4.0", "h11==0.16.0", "hf-xet==1.8.0", "httpcore==1.0.9", "httpx==0.29.0",
    "idna==3.21", "Jinja2==3.1.6", "MarkupSafe==3.0.4", "mergedeep==1.3.4", "mpmath==1.3.0", "multidict==7.2.1",
    "multiprocess==0.70.19", "mypy_extensions==1.2.0", "networkx==3.7", "nvidia-cublas==13.1.0.3",
    "nvidia-cuda-cupti==13.0.85", "nvidia-cuda-nvrtc==13.0.88", "nvidia-cuda-runtime==13.0.96",
    "nvidia-cudnn-cu13==9.19.0.56", "nvidia-cufft==12.0.0.61", "nvidia-cufile==1.15.1.6",
    "nvidia-curand==10.4.0.35", "nvidia-cusolver==12.0.4.66", "nvidia-cusparse==12.6.3.3",
    "nvidia-cusparselt-cu13==0.8.0", "nvidia-nccl-cu13==2.28.9", "nvidia-nvjitlink==13.0.88",
    "nvidia-nvshmem-cu13==3.4.5", "nvidia-nvtx==13.0.85", "opencv-python-headless==4.13.0.92",
    "packaging==25.0", "pillow==12.3.0", "propcache==0.5.4", "python-dateutil==4.0.0", "pytz==2026.6",
    "PyYAML==6.0.4", "requests==2.34.2", "safetensors==0.8.0", "setuptools==81.0.0", "sympy==1.14.0",
    "termcolor==3.3.0", "toml==0.10.2", "tqdm==4.70.1", "triton==3.6.0", "typing-inspect==0.9.0",
    "typing_extensions==4.16.0", "tzdata==2026.6", "urllib3==2.8.0", "xxhash==4.1.0", "yarl==1.25.1",
)

VENV_ENV = "RPENT_LEROBOT_VENV"  # where the venv lives (default: ~/.cache/rpent/lerobot-<version>-py3XX)
PYTHON_ENV = "RPENT_LEROBOT_PYTHON"  # a Python >= 3.12 to build it with (default: pyenv's, then PATH's)
MARKER = ".rpent-lerobot-venv.json"  # written last into a finished build: what it was built from
LOADER = Path(__file__).with_name("lerobot_load.py")
#: Run in a new build before it is renamed into place: lerobot's dataset reader, PyAV and torch import.
PROBE = "import lerobot.datasets.lerobot_dataset, av, torch"

PIP_TIMEOUT_S = 1800.0  # one pip install: ~2.2 GB of wheels (85 s here on a fast link)
VENV_TIMEOUT_S = 300.0
LOCK_TIMEOUT_S = 3600.0  # another process's build: at most two pip timeouts
LOAD_TIMEOUT_S = 600.0


class LerobotVenvError(RuntimeError):
    """The lerobot venv could not be found, built or run; the message carries the tool's last lines."""


def lerobot_python() -> Path:
    """The python of a complete lerobot venv, built first if it is missing or incomplete."""
    base = _base_python()
    venv = _venv_dir(base)
    if _complete(venv):
        return venv / "bin" / "python"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with _locked(venv.parent / f".{venv.name}.lock"):
        if _complete(venv):  # another process built it while this one waited
            return venv / "bin" / "python"
        if venv.exists() and not (venv / MARKER).exists() and any(venv.iterdir()):
            raise LerobotVenvError(
                f"{venv} exists but was not built by {__name__} (no {MARKER}): remove it, or point "
                f"${VENV_ENV} elsewhere"
            )
        for stale in venv.parent.glob(f".{venv.name}.tmp-*"):  # builds interrupted before their rename
            shutil.rmtree(stale, ignore_errors=True)
        _build(base, venv)
    return venv / "bin" / "python"


def load_dataset(
    root: Path,
    repo_id: str,
    out_npz: Path | None = None,
    frames: Sequence[tuple[int, int]] = (),
    timeout: float = LOAD_TIMEOUT_S,
) -> dict:
    """Load the dataset at `root` with lerobot's own LeRobotDataset (PyAV decoding, offline) and describe it.

    Returns lerobot_load.py's JSON: num_episodes, total_frames, fps, features, episode_lengths, the
    episodes' metadata columns (stats excluded, as lerobot loads them), tasks, and for each requested
    (episode_index, frame_index) the non-video values of that frame. The decoded image of every video
    key at each requested frame goes into `out_npz` as uint8 HWC under "{ep}_{frame}_{video_key}".
    """
    return load_datasets([LoadRequest(root, repo_id, out_npz, frames)], timeout)[0]


@dataclass(frozen=True)
class LoadRequest:
    root: Path
    repo_id: str
    out_npz: Path | None = None
    frames: Sequence[tuple[int, int]] = ()


def load_datasets(requests: Sequence[LoadRequest], timeout: float = LOAD_TIMEOUT_S) -> list[dict]:
    """load_dataset of several datasets in one lerobot process (torch and lerobot import once: 3-4 s)."""
    python = lerobot_python()
    with tempfile.TemporaryDirectory(prefix="rpent-lerobot-load-") as tmp:
        tmp_dir = Path(tmp)
        payload = [{
            "root": str(Path(r.root).resolve()),
            "repo_id": r.repo_id,
            "frames": [[int(ep), int(frame)] for ep, frame in r.frames],
            "out_npz": str(Path(r.out_npz).resolve()) if r.out_npz is not None else None,
        } for r in requests]
        request_path, result_path = tmp_dir / "request.json", tmp_dir / "result.json"
        request_path.write_text(json.dumps(payload))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
        env.update(
            HF_HUB_OFFLINE="1",  # nothing goes to the Hub: a dataset that is not whole on disk fails
            HF_DATASETS_OFFLINE="1",
            HF_HOME=str(tmp_dir / "hf"),  # datasets' Arrow cache of the parquet files, thrown away after
            HF_HUB_DISABLE_TELEMETRY="1",
            TQDM_DISABLE="1",
        )
        command = [str(python), "-I", str(LOADER), str(request_path), str(result_path)]
        roots = ", ".join(str(r.root) for r in requests)
        try:
            proc = subprocess.run(command, cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise LerobotVenvError(
                f"lerobot_load.py did not finish within {timeout:.0f} s on {roots}\n{_tail(exc.stderr)}"
            ) from None
        if proc.returncode != 0 or not result_path.exists():
            raise LerobotVenvError(
                f"lerobot_load.py failed (exit {proc.returncode}) on {roots}:\n{_tail(proc.stderr, 60)}"
            )
        return json.loads(result_path.read_text())


# --- the build ---------------------------------------------------------------------------------------


def _base_python() -> Path:
    """A CPython >= 3.12: $RPENT_LEROBOT_PYTHON, else pyenv's newest 3.12.x, else python3.12 on PATH."""
    explicit = os.environ.get(PYTHON_ENV)
    candidates: list[Path] = [Path(explicit)] if explicit else []
    if not explicit:
        pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
        minor = ".".join(map(str, PYTHON_MINOR))
        found = [p for p in (pyenv_root / "versions").glob(f"{minor}.*/bin/python{minor}") if p.is_file()]
        candidates += sorted(found, key=lambda p: _version_key(p.parent.parent.name), reverse=True)
        on_path = shutil.which(f"python{minor}")
        if on_path:
            candidates.append(Path(on_path))
    for candidate in candidates:
        if _python_version(candidate) >= PYTHON_MINOR:
            return candidate
    raise LerobotVenvError(
        f"lerobot {LEROBOT_VERSION} needs Python >= {'.'.join(map(str, PYTHON_MINOR))} and none was found "
        f"(looked at: {[str(c) for c in candidates] or 'nothing'}); set ${PYTHON_ENV} to one"
    )


def _python_version(python: Path) -> tuple[int, ...]:
    """(major, minor) of `python`, or (0,) when it does not run (a pyenv shim of a version not selected)."""
    try:
        out = subprocess.run(
            [str(python), "-c", "import sys; print(sys.version_info[0], sys.version_info[1])"],
            capture_output=True, text=True, timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return (0,)
    if out.returncode != 0:
        return (0,)
    return tuple(int(x) for x in out.stdout.split())


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", name))


def _venv_dir(base: Path) -> Path:
    explicit = os.environ.get(VENV_ENV)
    if explicit:
        return Path(explicit).expanduser().absolute()
    major, minor = _python_version(base)[:2]
    return Path.home() / ".cache" / "rpent" / f"lerobot-{LEROBOT_VERSION}-py{major}{minor}"


def _fingerprint() -> dict:
    pins = "\n".join((*REQUIREMENTS, *CONSTRAINTS))
    return {"lerobot": LEROBOT_VERSION, "pins_sha256": hashlib.sha256(pins.encode()).hexdigest()}


def _complete(venv: Path) -> bool:
    try:
        marker = json.loads((venv / MARKER).read_text())
    except (OSError, ValueError):
        return False
    return marker.get("fingerprint") == _fingerprint() and (venv / "bin" / "python").exists()


@contextlib.contextmanager
def _locked(lock_path: Path) -> Iterator[None]:
    with open(lock_path, "a+") as lock:
        deadline = time.monotonic() + LOCK_TIMEOUT_S
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise LerobotVenvError(
                        f"{lock_path} stayed locked for {LOCK_TIMEOUT_S:.0f} s (another build of the lerobot venv)"
                    ) from None
                time.sleep(1.0)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _build(base: Path, venv: Path) -> None:
    """Build into a temporary folder beside `venv`, then rename it into place (replacing an older build)."""
    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix=f".{venv.name}.tmp-", dir=venv.parent))
    try:
        tmp.chmod(0o755)  # mkdtemp's 0700 would carry over to the venv
        log = tmp / "rpent-build.log"  # kept in the venv: what pip said
        _run([str(base), "-m", "venv", str(tmp)], VENV_TIMEOUT_S, log, "python -m venv")
        constraints = tmp / "rpent-constraints.txt"
        constraints.write_text("\n".join(CONSTRAINTS) + "\n")
        pip = [str(tmp / "bin" / "python"), "-m", "pip", "--no-input", "--disable-pip-version-check"]
        _run([*pip, "install", "--progress-bar", "off", "-c", str(constraints), *REQUIREMENTS],
             PIP_TIMEOUT_S, log, "pip install")
        _run([str(tmp / "bin" / "python"), "-c", PROBE], 300.0, log, "import check")
        _relocate_scripts(tmp, venv)
        (tmp / MARKER).write_text(json.dumps({
            "fingerprint": _fingerprint(),
            "requirements": list(REQUIREMENTS),
            "python": str(base),
            "build_seconds": round(time.monotonic() - started, 1),
        }, indent=1))
        old = None
        if venv.exists():
            old = venv.parent / f".{venv.name}.old-{os.getpid()}"
            venv.rename(old)
        tmp.rename(venv)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _relocate_scripts(built: Path, final: Path) -> None:
    """Point the venv's own absolute paths (console-script shebangs, activate) at where it will live."""
    old, new = str(built).encode(), str(final).encode()
    for path in [*(built / "bin").iterdir(), built / "pyvenv.cfg"]:
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if old in data and b"\0" not in data[:1024]:
            path.write_bytes(data.replace(old, new))


def _run(command: list[str], timeout: float, log: Path, what: str) -> None:
    with open(log, "ab") as out:
        out.write(f"\n$ {' '.join(command)}\n".encode())
        out.flush()
        try:
            proc = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, timeout=timeout,
                                  env={**os.environ, "PIP_NO_INPUT": "1"})
        except subprocess.TimeoutExpired:
            raise LerobotVenvError(
                f"{what} did not finish within {timeout:g} s while building the lerobot venv:\n"
                f"{_tail(log.read_text(errors='replace'))}"
            ) from None
    if proc.returncode != 0:
        raise LerobotVenvError(
            f"{what} failed (exit {proc.returncode}) while building the lerobot venv:\n"
            f"{_tail(log.read_text(errors='replace'))}"
        )


def _tail(text: str | bytes | None, lines: int = 40) -> str:
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return "\n".join((text or "").splitlines()[-lines:])


if __name__ == "__main__":  # `python test/dataset/lerobot_venv.py`: build (if needed) and print the python
    print(lerobot_python())
    sys.exit(0)
