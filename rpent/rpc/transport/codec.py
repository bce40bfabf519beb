"""The JSON codec of rpent.rpc: NumPy-aware and lossless for arrays and NumPy scalars.

Tagged objects (each a JSON object holding one marker key):

- ``{"__ndarray__": <base64 of C-order bytes>, "dtype": "<f4", "shape": [2, 3]}``; ``dtype`` is
  ``numpy.dtype.str``, so byte order survives (big-endian arrays stay big-endian).
- ``{"__npscalar__": <number | bool | [re, im]>, "dtype": "<f2"}`` for NumPy scalars; NaN and
  infinities are written as the strings ``"nan"``, ``"inf"``, ``"-inf"``.
- ``{"__float__": "nan" | "inf" | "-inf"}`` for non-finite Python floats (JSON has no literal).
- ``{"__tuple__": [...]}`` so tuples come back as tuples; ``{"__bytes__": <base64>}`` for bytes.
- ``{"__dict__": {...}}`` wraps a user dict that itself holds a marker key, so user data is
  never mistaken for a tag.

Decoded arrays are writable and C-contiguous. Integers must fit in 64 bits. An array tag is
checked in full before anything is allocated: ``dtype`` a string naming an allowed kind (no
objects, fields, subarrays or zero-size items), ``shape`` a list of at most 32 non-negative
integers within the size limit, and exactly ``prod(shape) * itemsize`` bytes of payload.
Errors name their place the same way both ways, e.g. ``value.obs[1].__ndarray__: ...``.
orjson and pybase64 do the byte work: with the standard library's json and base64 a
LIBERO-sized observation cost ~10x more per round trip (see bench/bench_rpc.py).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import orjson
import pybase64

NDARRAY = "__ndarray__"
NPSCALAR = "__npscalar__"
FLOAT = "__float__"
TUPLE = "__tuple__"
BYTES = "__bytes__"
DICT = "__dict__"
REF = "__ndarray_ref__"  # only ever made by the decoder's fast path, never sent
_MARKERS = frozenset((NDARRAY, NPSCALAR, FLOAT, TUPLE, BYTES, DICT, REF))

# dtype kinds whose raw bytes are self-describing given dtype.str.
_ARRAY_KINDS = frozenset("biufcmMUS")
_SCALAR_KINDS = frozenset("biufc")
_NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
_MAX_DIMS = 32  # NumPy 1.x's limit; NumPy 2 allows 64, but no peer of ours sends that many
# Zero-size arrays carry no bytes, yet NumPy still refuses shapes whose other dimensions overflow.
_MAX_ARRAY_BYTES = 2**40


class CodecError(ValueError):
    """A value cannot be encoded, or a message cannot be decoded; names the place in the structure."""

    def __init__(self, message: str, path: tuple[str, ...] = ()) -> None:
        self.reason = message
        self.path = path
        super().__init__(self._text())

    def _text(self) -> str:
        return f"value{''.join(self.path)}: {self.reason}"

    @property
    def where(self) -> str:
        """The place without the root, e.g. ``kwargs.x.__ndarray__``; empty for the whole message."""
        return "".join(self.path).removeprefix(".")

    def at(self, step: str) -> CodecError:
        self.path = (step, *self.path)
        self.args = (self._text(),)
        return self


# -- encoding ----------------------------------------------------------------------------------
def _float_item(x: float) -> float | str:
    if math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def _encode_array(arr: np.ndarray) -> dict[str, Any]:
    dtype = arr.dtype
    if dtype.kind not in _ARRAY_KINDS or dtype.fields is not None or dtype.subdtype is not None:
        raise CodecError(f"numpy arrays of dtype {dtype} cannot be sent (numeric, bool, datetime, str, bytes only)")
    data = arr if arr.flags.c_contiguous else np.ascontiguousarray(arr)
    return {
        NDARRAY: pybase64.b64encode_as_string(data.reshape(-1).view(np.uint8) if data.size else b""),
        "dtype": dtype.str,
        "shape": list(arr.shape),
    }


def _encode_scalar(value: np.generic) -> Any:
    if isinstance(value, np.str_):
        return str(value)
    if isinstance(value, np.bytes_):
        return {BYTES: pybase64.b64encode_as_string(bytes(value))}
    dtype = value.dtype
    if dtype.kind not in _SCALAR_KINDS or dtype.itemsize > (16 if dtype.kind == "c" else 8):
        raise CodecError(f"numpy scalars of dtype {dtype} cannot be sent (wrap them in a 0-d array)")
    if dtype.kind == "c":
        item: Any = [_float_item(float(value.real)), _float_item(float(value.imag))]
    elif dtype.kind == "f":
        item = _float_item(float(value))
    else:
        item = value.item()
    return {NPSCALAR: item, "dtype": dtype.str}


def to_jsonable(value: Any) -> Any:
    """Turn a nested structure of dict/list/tuple/arrays/scalars into plain JSON values."""
    kind = type(value)
    if value is None or kind is bool or kind is int or kind is str:
        return value
    if kind is float:
        return value if math.isfinite(value) else {FLOAT: _float_item(value)}
    if isinstance(value, np.ndarray):
        return _encode_array(value)
    if isinstance(value, np.generic):
        return _encode_scalar(value)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                raise CodecError(f"dict keys must be str, got {type(key).__name__} {key!r}")
            try:
                out[key] = to_jsonable(item)
            except CodecError as exc:
                raise exc.at(_key_step(key)) from None
        return {DICT: out} if not _MARKERS.isdisjoint(out) else out
    if isinstance(value, (list, tuple)):
        items = []
        for index, item in enumerate(value):
            try:
                items.append(to_jsonable(item))
            except CodecError as exc:
                raise exc.at(f"[{index}]") from None
        return {TUPLE: items} if isinstance(value, tuple) else items
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {BYTES: pybase64.b64encode_as_string(value)}
    # Subclasses such as IntEnum travel as their plain base value.
    for base in (bool, int, float, str):
        if isinstance(value, base):
            return to_jsonable(base(value))
    raise CodecError(f"cannot encode {kind.__module__}.{kind.__qualname__}")


def _key_step(key: str) -> str:
    return f".{key}" if key.isidentifier() else f"[{key!r}]"


def dumps(value: Any) -> bytes:
    """Encode to JSON bytes. Raises CodecError naming the offending place in ``value``."""
    tree = to_jsonable(value)
    try:
        return orjson.dumps(tree)
    except orjson.JSONEncodeError as exc:  # e.g. an int beyond 64 bits
        raise CodecError(f"not encodable as JSON ({exc})") from None


# -- decoding ----------------------------------------------------------------------------------
# Building multi-megabyte Python str objects for base64 payloads dominated decoding (~10 ms for a
# LIBERO observation with history). So before parsing, each ``{"__ndarray__":"<base64>"`` that opens
# an object is rewritten to ``{"__ndarray_ref__":N}``-style and the base64 is decoded straight from
# the input bytes. That byte pattern cannot occur inside a JSON string (its quotes are unescaped), so
# it only ever matches real structure. Inputs holding the literal key "__ndarray_ref__", or a
# matched string with escapes in it, are parsed the plain way.
_ARRAY_OPEN = b'{"__ndarray__":"'
_REF_KEY = b'"__ndarray_ref__"'
_FAST_PATH_MIN_BYTES = 32 * 1024


def _extract_payloads(data: bytes | bytearray | memoryview) -> tuple[bytes, list[memoryview]] | None:
    raw = data if isinstance(data, (bytes, bytearray)) else bytes(data)
    if len(raw) < _FAST_PATH_MIN_BYTES or raw.find(_REF_KEY) != -1:
        return None
    view = memoryview(raw)
    pieces: list[bytes | memoryview] = []
    spans: list[memoryview] = []
    pos = 0
    while (found := raw.find(_ARRAY_OPEN, pos)) != -1:
        start = found + len(_ARRAY_OPEN)
        end = raw.find(b'"', start)
        if end == -1 or raw.find(b"\\", start, end) != -1:
            return None
        pieces.append(view[pos:found])
        pieces.append(b'{"%s":%d' % (REF.encode(), len(spans)))
        spans.append(view[start:end])
        pos = end + 1
    if not spans:
        return None
    pieces.append(view[pos:])
    return b"".join(pieces), spans


def _b64(text: Any, *, max_bytes: int | None = None, need: str = "") -> bytearray:
    if not isinstance(text, (str, memoryview)):
        raise CodecError(f"payload must be a base64 string, got {type(text).__name__}")
    if max_bytes is not None and len(text) > 4 * (max_bytes // 3 + 1):
        raise CodecError(f"holds more bytes than {need} allow ({max_bytes})")
    try:
        return pybase64.b64decode_as_bytearray(text, validate=True)
    except ValueError:
        raise CodecError("payload is not valid base64") from None


def _number(value: Any) -> float:
    if isinstance(value, str):
        if value not in _NONFINITE:
            raise CodecError(f"number string {value!r} is not one of nan, inf, -inf")
        return _NONFINITE[value]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CodecError(f"expected a number, got {type(value).__name__}")
    return value


def _dtype(text: Any) -> np.dtype:
    if not isinstance(text, str):
        raise CodecError(f"dtype must be a string such as '<f4', got {type(text).__name__}")
    try:
        return np.dtype(text)
    except Exception:  # NumPy's parser raises TypeError, ValueError or worse for odd strings
        raise CodecError(f"dtype {text!r} is not a NumPy dtype") from None


def _show(value: Any) -> str:
    text = orjson.dumps(value).decode()
    return text if len(text) <= 60 else text[:57] + "..."


def _array_layout(obj: dict[str, Any]) -> tuple[np.dtype, tuple[int, ...], int]:
    """Dtype, shape and byte count of an array tag, all checked before anything is allocated."""
    shape = obj.get("shape")
    bad_shape = CodecError(
        f"shape {_show(shape)} is not a list of at most {_MAX_DIMS} non-negative integers within the size limit"
    )
    if type(shape) is not list or len(shape) > _MAX_DIMS or not all(type(n) is int and n >= 0 for n in shape):
        raise bad_shape
    dtype = _dtype(obj.get("dtype"))
    if dtype.kind not in _ARRAY_KINDS or dtype.fields is not None or dtype.subdtype is not None or not dtype.itemsize:
        raise CodecError(
            f"dtype {obj['dtype']!r} is not allowed (bool, integer, float, complex, datetime, timedelta, str or "
            "bytes items of non-zero size; no objects, fields or subarrays)"
        )
    if dtype.itemsize * math.prod(n for n in shape if n) > _MAX_ARRAY_BYTES:
        raise bad_shape
    return dtype, tuple(shape), dtype.itemsize * math.prod(shape)


def _decode_scalar(obj: dict[str, Any]) -> np.generic:
    text = obj.get("dtype")
    dtype = _dtype(text)
    if dtype.kind not in _SCALAR_KINDS:
        raise CodecError(f"dtype {text!r} is not a scalar dtype (bool, integer, float, complex)")
    value = obj[NPSCALAR]
    if dtype.kind == "b":
        if not isinstance(value, bool):
            raise CodecError(f"dtype {text!r} needs true or false, got {_show(value)}")
        return dtype.type(value)
    if dtype.kind in "iu" and (isinstance(value, bool) or not isinstance(value, int)):
        raise CodecError(f"dtype {text!r} needs an integer, got {_show(value)}")
    if dtype.kind == "c" and not (isinstance(value, list) and len(value) == 2):
        raise CodecError(f"dtype {text!r} needs [real, imag], got {_show(value)}")
    if dtype.kind == "c":
        number: Any = complex(_number(value[0]), _number(value[1]))
    else:
        number = _number(value) if dtype.kind == "f" else value
    try:
        return dtype.type(number)
    except (TypeError, ValueError, OverflowError):
        raise CodecError(f"{_show(value)} does not fit dtype {text!r}") from None


class _Decoder:
    def __init__(self, spans: list[memoryview] | None = None) -> None:
        self.spans = spans

    def _span(self, ref: Any) -> memoryview:
        if self.spans is None or type(ref) is not int or not 0 <= ref < len(self.spans):
            raise CodecError(f"malformed {REF} tag")
        return self.spans[ref]

    def _span_text(self, ref: Any) -> str:
        try:
            return bytes(self._span(ref)).decode("utf-8")
        except UnicodeDecodeError:
            raise CodecError("string is not valid UTF-8") from None

    def value(self, value: Any) -> Any:
        kind = type(value)
        if kind is dict:
            if len(value) <= 3 and not _MARKERS.isdisjoint(value):
                return self.tag(value)
            return self.mapping(value)
        if kind is list:
            items = []
            for index, item in enumerate(value):
                try:
                    items.append(self.value(item))
                except CodecError as exc:
                    raise exc.at(f"[{index}]") from None
            return items
        return value

    def mapping(self, value: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for key, item in value.items():
            try:
                out[key] = self.value(item)
            except CodecError as exc:
                raise exc.at(_key_step(key)) from None
        return out

    def tag(self, obj: dict[str, Any]) -> Any:
        marker = next(m for m in (NDARRAY, REF, NPSCALAR, FLOAT, TUPLE, BYTES, DICT) if m in obj)
        try:
            return self._tag(marker, obj)
        except CodecError as exc:
            # The fast path's reference stands for the sender's __ndarray__ payload.
            shown = NDARRAY if marker == REF and self.spans is not None else marker
            raise exc.at(f".{shown}") from None

    def _tag(self, marker: str, obj: dict[str, Any]) -> Any:
        if marker == NDARRAY:
            return self.array(obj[NDARRAY], obj)
        if marker == REF:
            return self.array(self._span(obj[REF]), obj)
        if marker == NPSCALAR:
            return _decode_scalar(obj)
        if marker == FLOAT:
            return float(_number(obj[FLOAT]))
        if marker == TUPLE:
            items = obj[TUPLE]
            if not isinstance(items, list):
                raise CodecError(f"must hold a list, got {type(items).__name__}")
            return tuple(self.value(items))
        if marker == BYTES:
            return bytes(_b64(obj[BYTES]))
        inner = obj[DICT]
        if not isinstance(inner, dict):
            raise CodecError(f"must hold an object, got {type(inner).__name__}")
        if self.spans is None or REF not in inner:
            return self.mapping(inner)
        # The fast path set aside a user's string stored under the key "__ndarray__".
        return {
            (NDARRAY if key == REF else key): (self._span_text(item) if key == REF else self.value(item))
            for key, item in inner.items()
        }

    def array(self, payload: str | memoryview, obj: dict[str, Any]) -> np.ndarray:
        dtype, shape, expected = _array_layout(obj)
        need = f"dtype {obj['dtype']} and shape {_show(obj['shape'])}"
        raw = _b64(payload, max_bytes=expected, need=need)
        if len(raw) != expected:
            raise CodecError(f"holds {len(raw)} bytes but {need} need {expected}")
        if expected == 0:
            return np.zeros(shape, dtype=dtype)
        return np.frombuffer(raw, dtype=dtype).reshape(shape)


def from_jsonable(value: Any) -> Any:
    """Inverse of :func:`to_jsonable`."""
    return _Decoder().value(value)


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Decode JSON made by :func:`dumps`. Raises CodecError on malformed input."""
    extracted = None if isinstance(data, str) else _extract_payloads(data)
    document, spans = extracted if extracted is not None else (data, None)
    try:
        tree = orjson.loads(document)
    except orjson.JSONDecodeError as exc:
        raise CodecError(f"not valid JSON ({exc})") from None
    try:
        return _Decoder(spans).value(tree)
    except RecursionError:
        raise CodecError("nesting too deep") from None
