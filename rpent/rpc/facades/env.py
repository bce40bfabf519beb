"""Env over RPC: ``BaseEnvFacade`` on the simulator side, ``BaseEnvClient`` on the agent side.

A robot's env server subclasses BaseEnvFacade and implements the ``Env`` methods; the base
registers the routes, checks arguments before the simulator sees them, and turns results
into wire values. BaseEnvClient implements ``rpent.runtime.env.Env`` over the wire, so a
toolkit drives an env in another process exactly like a local one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

import numpy as np

from rpent.rpc.errors import RpcProtocolError
from rpent.rpc.facade import RpcFacade
from rpent.rpc.transport.client import RpcClient
from rpent.rpc.transport.endpoint import Endpoint
from rpent.runtime.env import Observation, StepResult

# A LIBERO env takes ~10-13 s to create and ~6-7 s to reset on these machines.
DEFAULT_RESET_TIMEOUT_S = 120.0


def check_action(action: Any, action_dim: int | None) -> np.ndarray:
    """The action as a finite float64 vector, or ValueError naming the rule it breaks."""
    try:
        arr = np.asarray(action, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"action: must be a numeric vector, got {type(action).__name__}") from None
    if arr.ndim != 1:
        raise ValueError(f"action: must be 1-D, got shape {arr.shape}")
    if action_dim is not None and arr.shape[0] != action_dim:
        raise ValueError(f"action: must have {action_dim} components, got {arr.shape[0]}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("action: every component must be finite (no NaN or inf)")
    return arr


def _check_size(name: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 1 <= int(value) <= 4096:
        raise ValueError(f"{name}: must be an integer from 1 to 4096, got {value!r}")
    return int(value)


class BaseEnvFacade(RpcFacade, ABC):
    """Serve an env: implement ``reset``, ``step``, ``cameras``, ``render``, ``success`` (and ``close``).

    Set ``action_dim`` to have action lengths checked before ``step`` is called. All routes
    run under the facade lock: the simulator is never stepped by two calls at once.
    """

    action_dim: int | None = None

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._register_rpc("reset", self._rpc_reset)
        self._register_rpc("step", self._rpc_step)
        self._register_rpc("cameras", self._rpc_cameras)
        self._register_rpc("render", self._rpc_render)
        self._register_rpc("success", self._rpc_success)

    @abstractmethod
    def reset(self, *, seed: int | None = None, options: Mapping[str, Any] | None = None) -> Observation: ...

    @abstractmethod
    def step(self, action: np.ndarray) -> StepResult: ...

    @abstractmethod
    def cameras(self) -> list[str]: ...

    @abstractmethod
    def render(self, camera: str, *, width: int | None = None, height: int | None = None) -> np.ndarray: ...

    @abstractmethod
    def success(self) -> bool: ...

    # -- routes: argument checks and wire conversion -----------------------------------------
    def _rpc_reset(self, seed: int | None = None, options: Mapping[str, Any] | None = None) -> Observation:
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
            raise ValueError(f"seed: must be an integer or null, got {seed!r}")
        if options is not None and not isinstance(options, Mapping):
            raise ValueError(f"options: must be a mapping or null, got {type(options).__name__}")
        return self.reset(seed=None if seed is None else int(seed), options=options)

    def _rpc_step(self, action: Any) -> dict[str, Any]:
        result = self.step(check_action(action, self.action_dim))
        if not isinstance(result, StepResult):
            raise TypeError(f"{type(self).__name__}.step must return a StepResult, got {type(result).__name__}")
        return result.to_dict()

    def _rpc_cameras(self) -> list[str]:
        return list(self.cameras())

    def _rpc_render(self, camera: str, width: int | None = None, height: int | None = None) -> np.ndarray:
        names = self.cameras()
        if camera not in names:
            raise ValueError(f"camera: {camera!r} is not one of {', '.join(map(repr, names)) or '(none)'}")
        return self.render(camera, width=_check_size("width", width), height=_check_size("height", height))

    def _rpc_success(self) -> bool:
        return bool(self.success())


class BaseEnvClient(RpcClient):
    """``rpent.runtime.env.Env`` over RPC. Subclasses add robot-specific calls with ``self.call``."""

    def __init__(
        self,
        endpoint: str | Endpoint,
        *,
        reset_timeout_s: float = DEFAULT_RESET_TIMEOUT_S,
        **kwargs: Any,
    ) -> None:
        super().__init__(endpoint, **kwargs)
        self.reset_timeout_s = reset_timeout_s

    def reset(
        self,
        *,
        seed: int | None = None,
        options: Mapping[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> Observation:
        obs = self.call(
            "reset",
            kwargs={"seed": seed, "options": dict(options) if options is not None else None},
            timeout_s=timeout_s if timeout_s is not None else self.reset_timeout_s,
        )
        if not isinstance(obs, dict):
            raise RpcProtocolError(f"reset returned {type(obs).__name__}, not a dict", endpoint=str(self.endpoint))
        return obs

    def step(self, action: Any, *, timeout_s: float | None = None) -> StepResult:
        # Checked here too, so a bad action fails before a round trip and names the field.
        arr = check_action(action, None)
        reply = self.call("step", [arr], timeout_s=timeout_s)
        try:
            return StepResult.from_dict(reply)
        except (ValueError, TypeError, AttributeError) as exc:
            raise RpcProtocolError(f"malformed step reply: {exc}", endpoint=str(self.endpoint), method="step") from None

    def cameras(self, *, timeout_s: float | None = None) -> list[str]:
        return list(self.call("cameras", timeout_s=timeout_s))

    def render(
        self, camera: str, *, width: int | None = None, height: int | None = None, timeout_s: float | None = None
    ) -> np.ndarray:
        frame = self.call("render", [camera], {"width": width, "height": height}, timeout_s=timeout_s)
        if not isinstance(frame, np.ndarray):
            raise RpcProtocolError("render returned no array", endpoint=str(self.endpoint), method="render")
        return frame

    def success(self, *, timeout_s: float | None = None) -> bool:
        return bool(self.call("success", timeout_s=timeout_s))
