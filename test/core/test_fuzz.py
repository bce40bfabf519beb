"""Whatever arrives as arguments, execute_tool answers with a ToolResult and the toolkit keeps working."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from rpent.tools import ToolResult

from .toolkits import Gates, ObservingToolkit

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
arguments = st.one_of(
    json_values,
    st.dictionaries(st.sampled_from(["label", "block", "meet", "frames", "status", "ctx", "path", "x"]), json_values),
    st.text(max_size=40),
)
names = st.sampled_from(["work", "peek", "fail", "paint", "finish", "read_text_file", "list_dir", "nope", ""])

KIT = ObservingToolkit(robot=Gates())


@settings(max_examples=300, deadline=None)
@given(name=names, args=arguments)
def test_random_input_always_gets_a_tool_result(name, args):
    if name in ("work", "peek") and isinstance(args, dict) and args.get("block") is True:
        args = {**args, "block": False}  # a blocking call would wait for a release no fuzz case sends
    result = KIT.execute_tool(name, args)
    assert isinstance(result, ToolResult)
    json.loads(result.to_text())
    # The toolkit still works afterwards.
    assert not KIT.execute_tool("work", {"label": "alive"}).is_error
