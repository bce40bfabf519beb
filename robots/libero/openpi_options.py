"""How an openpi policy server (``--vla-endpoint ws://...``) is fed: image size, keys, replanning, deadlines.

The defaults are those of openpi's LIBERO example, which pi0 / pi0-FAST / pi05 LIBERO checkpoints
were evaluated with; a server trained with other keys or another image size needs the flags.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from rpent.robot import ConfigError
from rpent.rpc.transport.vla_openpi import DEFAULT_CONNECT_TIMEOUT_S, DEFAULT_INFER_TIMEOUT_S


@dataclass(frozen=True)
class OpenpiOptions:
    image_px: int = 224
    replan_steps: int = 5
    image_key: str = "observation/image"
    wrist_image_key: str = "observation/wrist_image"
    state_key: str = "observation/state"
    prompt_key: str = "prompt"
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    infer_timeout_s: float = DEFAULT_INFER_TIMEOUT_S

    def __post_init__(self) -> None:
        if not 16 <= self.image_px <= 1024:
            raise ValueError(f"image_px: must be from 16 to 1024 pixels, got {self.image_px}")
        if not 1 <= self.replan_steps <= 400:
            raise ValueError(f"replan_steps: must be from 1 to 400, got {self.replan_steps}")
        keys = {
            "image_key": self.image_key,
            "wrist_image_key": self.wrist_image_key,
            "state_key": self.state_key,
            "prompt_key": self.prompt_key,
        }
        for name, key in keys.items():
            if not key or key != key.strip():
                raise ValueError(f"{name}: must be a non-empty key without surrounding spaces, got {key!r}")
        if len(set(keys.values())) != len(keys):
            raise ValueError(f"image_key, wrist_image_key, state_key and prompt_key must differ, got {keys}")
        for name in ("connect_timeout_s", "infer_timeout_s"):
            value = getattr(self, name)
            if not 0 < value <= 3600:
                raise ValueError(f"{name}: must be more than 0 and at most 3600 seconds, got {value}")


_FLAGS = {
    "image_px": ("--openpi-image-px", int, "image width and height sent to the policy"),
    "replan_steps": ("--openpi-replan-steps", int, "actions executed from each chunk before asking again"),
    "image_key": ("--openpi-image-key", str, "observation key of the agent-view image"),
    "wrist_image_key": ("--openpi-wrist-image-key", str, "observation key of the wrist image"),
    "state_key": ("--openpi-state-key", str, "observation key of the 8-D state"),
    "prompt_key": ("--openpi-prompt-key", str, "observation key of the instruction"),
    "connect_timeout_s": ("--openpi-connect-timeout-s", float, "deadline for connecting and the server's metadata"),
    "infer_timeout_s": ("--openpi-infer-timeout-s", float, "deadline for one inference"),
}


def add_openpi_args(group: argparse._ArgumentGroup) -> None:
    """The flags of a ``ws://`` / ``wss://`` --vla-endpoint (ignored for the other transports)."""
    defaults = OpenpiOptions()
    for field, (flag, kind, text) in _FLAGS.items():
        default = getattr(defaults, field)
        group.add_argument(flag, type=kind, default=default, help=f"openpi VLA: {text} (default {default})")


def openpi_options(args: argparse.Namespace) -> OpenpiOptions:
    """The options from parsed flags; ConfigError names the flag and its rule."""
    values = {field: getattr(args, flag[2:].replace("-", "_"), None) for field, (flag, _, _) in _FLAGS.items()}
    try:
        return OpenpiOptions(**{k: v for k, v in values.items() if v is not None})
    except ValueError as exc:
        field = str(exc).split(":", 1)[0]
        flag = _FLAGS[field][0] if field in _FLAGS else "--openpi-*"
        raise ConfigError(f"{flag}: {str(exc).split(':', 1)[-1].strip()}") from None
