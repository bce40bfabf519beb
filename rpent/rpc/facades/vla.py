"""Policy (VLA) over RPC: ``BaseVLAFacade`` on the model side, ``BaseVLAClient`` on the agent side.

A model server subclasses BaseVLAFacade and implements ``predict`` and ``reset``; the base
checks the observation and instruction and normalises the action chunk to (T, action_dim)
float32. BaseVLAClient implements ``rpent.runtime.env.Policy`` over the wire.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

import numpy as np

from rpent.rpc.errors import RpcProtocolError
from rpent.rpc.facade import RpcFacade
from rpent.rpc.transport.client import RpcClient

MAX_INSTRUCTION_CHARS = 2000


def as_action_chunk(actions: Any, *, who: str = "policy") -> np.ndarray:
    """(T, action_dim) float32 with T >= 1; a single action vector becomes a chunk of one."""
    arr = np.asarray(actions, dtype=np.float32)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ValueError(f"{who}: action chunk must have shape (T, action_dim) with T >= 1, got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{who}: action chunk holds NaN or inf")
    return arr


class BaseVLAFacade(RpcFacade, ABC):
    """Serve a policy: implement ``predict`` and ``reset``. Calls run under the facade lock."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._register_rpc("predict", self._rpc_predict)
        self._register_rpc("reset", self._rpc_reset)

    @abstractmethod
    def predict(self, observation: Mapping[str, Any], instruction: str) -> np.ndarray: ...

    @abstractmethod
    def reset(self) -> None: ...

    def _rpc_predict(self, observation: Any, instruction: Any) -> np.ndarray:
        if not isinstance(observation, Mapping):
            raise ValueError(f"observation: must be a dict, got {type(observation).__name__}")
        if not isinstance(instruction, str):
            raise ValueError(f"instruction: must be a string, got {type(instruction).__name__}")
        if len(instruction) > MAX_INSTRUCTION_CHARS:
            raise ValueError(f"instruction: must be at most {MAX_INSTRUCTION_CHARS} characters, got {len(instruction)}")
        return as_action_chunk(self.predict(observation, instruction), who=type(self).__name__)

    def _rpc_reset(self) -> None:
        self.reset()


class BaseVLAClient(RpcClient):
    """``rpent.runtime.env.Policy`` over RPC."""

    def predict(
        self, observation: Mapping[str, Any], instruction: str, *, timeout_s: float | None = None
    ) -> np.ndarray:
        reply = self.call("predict", [dict(observation), instruction], timeout_s=timeout_s)
        try:
            return as_action_chunk(reply, who="predict reply")
        except (ValueError, TypeError) as exc:
            raise RpcProtocolError(str(exc), endpoint=str(self.endpoint), method="predict") from None

    def reset(self, *, timeout_s: float | None = None) -> None:
        self.call("reset", timeout_s=timeout_s)
