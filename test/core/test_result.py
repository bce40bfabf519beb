"""ToolResult: payload merging and the model-facing text limit."""

import json

from rpent.tools import ToolResult
from rpent.tools.result import MAX_TEXT_BYTES


def test_to_dict_merges_data_and_error():
    result = ToolResult(data={"x": 1}, error="bad")
    assert result.to_dict() == {"x": 1, "error": "bad"}
    assert result.is_error
    assert ToolResult(data={"x": 1}).to_dict() == {"x": 1}
    assert not ToolResult().is_error


def test_to_text_is_json_and_keeps_images_out():
    result = ToolResult(data={"ok": True}, images=[b"\x89PNG..."])
    assert json.loads(result.to_text()) == {"ok": True}


def test_to_text_truncates_to_the_byte_limit_without_splitting_a_character():
    result = ToolResult(data={"text": "é" * 50_000})  # 100,000 bytes of two-byte characters
    text = result.to_text()
    raw = text.encode("utf-8")
    assert len(raw) <= MAX_TEXT_BYTES
    assert "\ufffd" not in text
    assert "truncated" in text
    assert len(raw) > MAX_TEXT_BYTES - 200


def test_to_text_does_not_touch_a_short_payload():
    assert ToolResult(data={"a": "b"}).to_text() == '{"a": "b"}'


def test_numpy_values_are_serialisable():
    import numpy as np

    text = ToolResult(data={"q": np.arange(3, dtype=np.float32), "n": np.int64(4)}).to_text()
    assert json.loads(text) == {"q": [0.0, 1.0, 2.0], "n": 4}
