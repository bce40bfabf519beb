import math
from typing import Any
from unittest import mock

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from rpent.rpc.transport import codec

ARRAY_DTYPES = [
    np.dtype(d)
    for d in (
        "?",
        "u1",
        "i1",
        "<i2",
        ">i4",
        "<u8",
        ">i8",
        "<f2",
        ">f2",
        "<f4",
        ">f8",
        "<c8",
        ">c16",
        "<M8[s]",
        "<m8[ms]",
        "<U3",
        ">U2",
        "S4",
    )
]
SCALAR_DTYPES = [np.dtype(d) for d in ("?", "u1", "i2", "<i4", "u8", "i8", "<f2", "<f4", ">f8", "<c8", "c16")]
MARKER_KEYS = [*sorted(codec._MARKERS), "dtype", "shape"]


def _arrays() -> st.SearchStrategy[np.ndarray]:
    shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)
    base = st.sampled_from(ARRAY_DTYPES).flatmap(lambda dt: hnp.arrays(dt, shapes))
    # Strided and transposed views are not C-contiguous; they must arrive with the same values.
    views = base.filter(lambda a: a.ndim >= 1).flatmap(
        lambda a: st.sampled_from([a[::2], a[::-1], a.T, np.asfortranarray(a)])
    )
    return base | views


def _np_scalars() -> st.SearchStrategy[np.generic]:
    return st.sampled_from(SCALAR_DTYPES).flatmap(lambda dt: hnp.from_dtype(dt).map(dt.type))


LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
    | st.binary(max_size=8)
    | _np_scalars()
    | _arrays()
)
KEYS = st.text(max_size=6) | st.sampled_from(MARKER_KEYS)
TREES = st.recursive(
    LEAVES,
    lambda children: (
        st.lists(children, max_size=4)
        | st.lists(children, max_size=4).map(tuple)
        | st.dictionaries(KEYS, children, max_size=4)
    ),
    max_leaves=12,
)


def assert_same(got: Any, want: Any) -> None:
    assert type(got) is type(want), (type(got), type(want))
    if isinstance(want, np.ndarray):
        assert got.dtype.str == want.dtype.str and got.shape == want.shape
        assert got.tobytes() == want.tobytes()  # bit-exact, NaN payloads included
        assert got.flags.writeable and got.flags.c_contiguous
    elif isinstance(want, np.generic):
        assert got.dtype.str == want.dtype.str
        for g, w in ((got.real, want.real), (got.imag, want.imag)) if want.dtype.kind == "c" else ((got, want),):
            assert (math.isnan(g) and math.isnan(w)) if want.dtype.kind in "fc" and math.isnan(w) else g == w
    elif isinstance(want, float):
        assert (math.isnan(got) and math.isnan(want)) or (
            got == want and math.copysign(1, got) == math.copysign(1, want)
        )
    elif isinstance(want, dict):
        assert list(got) == list(want)
        for key in want:
            assert_same(got[key], want[key])
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert_same(g, w)
    else:
        assert got == want


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TREES)
def test_any_nested_structure_of_arrays_and_scalars_round_trips_exactly(value: Any) -> None:
    assert_same(codec.loads(codec.dumps(value)), value)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TREES)
def test_large_message_fast_path_decodes_exactly_like_the_plain_parser(value: Any) -> None:
    data = codec.dumps(value)
    with mock.patch.object(codec, "_FAST_PATH_MIN_BYTES", 0):
        assert_same(codec.loads(data), value)
    assert_same(codec.from_jsonable(orjson.loads(data)), value)


def test_arrays_keep_dtype_byte_order_and_shape_on_the_wire() -> None:
    arr = np.arange(6, dtype=">f8").reshape(2, 3)[:, ::2]
    wire = orjson.loads(codec.dumps({"a": arr}))["a"]
    assert wire["dtype"] == ">f8" and wire["shape"] == [2, 2]
    back = codec.loads(codec.dumps(arr))
    assert back.dtype == np.dtype(">f8") and back.tolist() == [[0.0, 2.0], [3.0, 5.0]]


def test_numpy_scalars_are_tagged_with_their_dtype() -> None:
    wire = orjson.loads(codec.dumps([np.float16(1.5), np.int8(-3), np.bool_(True), np.float32("nan")]))
    assert wire == [
        {"__npscalar__": 1.5, "dtype": "<f2"},
        {"__npscalar__": -3, "dtype": "|i1"},
        {"__npscalar__": True, "dtype": "|b1"},
        {"__npscalar__": "nan", "dtype": "<f4"},
    ]


def test_zero_size_and_zero_dim_arrays_round_trip() -> None:
    for arr in (np.zeros((0, 3), np.uint8), np.zeros((2, 0), ">f4"), np.array(7, np.int16), np.array([], bool)):
        assert_same(codec.loads(codec.dumps(arr)), arr)


def test_user_dicts_holding_marker_keys_are_not_mistaken_for_tags() -> None:
    big = np.arange(10_000, dtype=np.float64)  # past the fast-path threshold
    value = {
        "meta": {"__ndarray__": "not base64 at all", "dtype": "<f4", "shape": [1]},
        "ref": {"__ndarray_ref__": 0},
        "quoted": {"__ndarray__": 'say "hi" \\ bye'},
        "big": big,
    }
    assert_same(codec.loads(codec.dumps(value)), value)


def test_unencodable_values_raise_naming_where_they_are() -> None:
    with pytest.raises(codec.CodecError, match=r"value\.obs\[1\]: cannot encode builtins.object"):
        codec.dumps({"obs": [1, object()]})
    with pytest.raises(codec.CodecError, match=r"value\.a: dict keys must be str"):
        codec.dumps({"a": {1: 2}})
    with pytest.raises(codec.CodecError, match="dtype object cannot be sent"):
        codec.dumps(np.array([None]))
    with pytest.raises(codec.CodecError, match="not encodable as JSON"):
        codec.dumps(2**70)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"{not json", "not valid JSON"),
        (
            b'{"__ndarray__": "AAAA", "dtype": "<f8", "shape": [1]}',
            r"holds 3 bytes but dtype <f8 and shape \[1\] need 8",
        ),
        (b'{"__ndarray__": "@@@@", "dtype": "u1", "shape": [3]}', "not valid base64"),
        (b'{"__ndarray__": "AAAA", "dtype": "O", "shape": [3]}', "dtype 'O' is not allowed"),
        (b'{"__ndarray__": "AAAA", "dtype": "u1", "shape": [-3]}', r"shape \[-3\] is not a list"),
        (b'{"__npscalar__": "x", "dtype": "<f4"}', "not one of nan, inf, -inf"),
        (b'{"__npscalar__": 1.5, "dtype": "<i4"}', "dtype '<i4' needs an integer, got 1.5"),
        (b'{"__tuple__": 5}', r"value.__tuple__: must hold a list, got int"),
        (b'{"__ndarray_ref__": 0, "dtype": "u1", "shape": [1]}', "malformed __ndarray_ref__ tag"),
    ],
)
def test_malformed_messages_raise_codec_errors_not_crashes(data: bytes, message: str) -> None:
    with pytest.raises(codec.CodecError, match=message):
        codec.loads(data)


def test_decoded_arrays_are_writable() -> None:
    arr = codec.loads(codec.dumps(np.arange(4, dtype=np.uint8)))
    arr += 1
    assert arr.tolist() == [1, 2, 3, 4]


# -- array tags are validated in full before anything is allocated ------------------------------
@pytest.mark.parametrize(
    ("tag", "message"),
    [
        # a zero-size array with more dimensions than NumPy has, or a dimension past any size
        ({"__ndarray__": "", "dtype": "<f8", "shape": [0, *[1] * 70]}, "shape .* is not a list of at most 32"),
        ({"__ndarray__": "", "dtype": "<f8", "shape": [0, 2**62]}, "within the size limit"),
        ({"__ndarray__": "", "dtype": "U0", "shape": [1e11]}, r"shape \[100000000000.0\] is not a list"),
        ({"__ndarray__": "", "dtype": "<f8", "shape": [True]}, "is not a list of at most 32 non-negative integers"),
        ({"__ndarray__": "", "dtype": "<f8", "shape": "3"}, "is not a list of at most 32 non-negative integers"),
        ({"__ndarray__": "", "dtype": "U0", "shape": [3]}, "dtype 'U0' is not allowed"),
        ({"__ndarray__": "", "dtype": "i4,i4", "shape": [0]}, "dtype 'i4,i4' is not allowed"),
        ({"__ndarray__": "", "dtype": "(2,)i4", "shape": [0]}, r"dtype '\(2,\)i4' is not allowed"),
        ({"__ndarray__": "", "dtype": {"names": ["a"], "formats": ["O"]}, "shape": [0]}, "dtype must be a string"),
        ({"__ndarray__": "", "dtype": "xyz", "shape": [0]}, "dtype 'xyz' is not a NumPy dtype"),
        ({"__ndarray__": "AAAA", "dtype": "<f8", "shape": [2]}, "holds 3 bytes but dtype <f8 and shape"),
        ({"__ndarray__": "A" * 400, "dtype": "u1", "shape": [2]}, "holds more bytes than dtype u1 and shape"),
        ({"__npscalar__": 1, "dtype": "xyz"}, "dtype 'xyz' is not a NumPy dtype"),
        ({"__npscalar__": 1, "dtype": ["i4"]}, "dtype must be a string"),
    ],
)
def test_malformed_array_tags_are_codec_errors_naming_the_tag_and_rule(tag: dict[str, Any], message: str) -> None:
    with pytest.raises(codec.CodecError, match=message) as err:
        codec.loads(orjson.dumps({"obs": [tag]}))
    marker = "__ndarray__" if "__ndarray__" in tag else "__npscalar__"
    assert err.value.where == f"obs[0].{marker}"


def test_decoding_errors_name_their_place_the_way_encoding_errors_do() -> None:
    with pytest.raises(codec.CodecError) as err:
        codec.loads(b'{"kwargs": {"x": {"__tuple__": [1, {"__float__": "big"}]}, "weird key": 1}}')
    assert str(err.value) == "value.kwargs.x.__tuple__[1].__float__: number string 'big' is not one of nan, inf, -inf"
    with pytest.raises(codec.CodecError) as err:
        codec.loads(b'{"weird key": {"__bytes__": 5}}')
    assert err.value.where == "['weird key'].__bytes__"
    with pytest.raises(codec.CodecError) as err:
        codec.loads(b"[1, 2")
    assert err.value.where == "" and "not valid JSON" in str(err.value)
