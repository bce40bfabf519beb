"""Runtime values over RuntimeCall (no rclpy): poses, states, outcomes and arrays, losslessly."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from rpent.rpc.transport.codec import from_jsonable, to_jsonable
from rpent.runtime.camera import CameraFrame, Intrinsics
from rpent.runtime.types import ArmState, GripperState, MotionOutcome, Pose

# Only these value types cross the wire: a node never builds arbitrary classes from a message.
_TYPES = {cls.__name__: cls for cls in (Pose, ArmState, GripperState, MotionOutcome, Intrinsics, CameraFrame)}


def encode(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        name = type(value).__name__
        if name not in _TYPES:
            raise TypeError(f"cannot send a {name} over RuntimeCall")
        return {"__runtime__": name, "fields": {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    return to_jsonable(value)


def decode(value: Any) -> Any:
    if isinstance(value, dict):
        if "__runtime__" in value:
            cls = _TYPES.get(value["__runtime__"])
            if cls is None:
                raise ValueError(f"unknown runtime type {value['__runtime__']!r}")
            fields = {k: decode(v) for k, v in value["fields"].items()}
            for key in ("position", "quaternion", "joints", "joint_velocities", "distortion"):
                if isinstance(fields.get(key), list):
                    fields[key] = tuple(fields[key])
            return cls(**fields)
        if any(k.startswith("__") for k in value):
            return from_jsonable(value)
        return {k: decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value


def encode_call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    return json.dumps({"args": encode(list(args)), "kwargs": encode(kwargs)})


def decode_call(args_json: str) -> tuple[list[Any], dict[str, Any]]:
    payload = json.loads(args_json or "{}")
    if not isinstance(payload, dict):
        raise ValueError("args_json: must be a JSON object {args, kwargs}")
    args, kwargs = decode(payload.get("args", [])), decode(payload.get("kwargs", {}))
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        raise ValueError("args_json: 'args' must be a list and 'kwargs' an object")
    return args, kwargs


def encode_result(value: Any) -> str:
    return json.dumps({"value": encode(value)})


def decode_result(result_json: str) -> Any:
    return decode(json.loads(result_json)["value"]) if result_json else None
