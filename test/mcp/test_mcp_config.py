"""Finding and reading `.mcp.json`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rpent.mcp.config import McpConfigError, find_mcp_config, load_mcp_config


def write(folder: Path, servers: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / ".mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return path


def test_the_nearest_config_up_to_nine_ancestors_is_found(tmp_path: Path) -> None:
    top = write(tmp_path, {})
    deep = tmp_path.joinpath(*[f"d{i}" for i in range(9)])
    deep.mkdir(parents=True)
    assert find_mcp_config(deep) == top  # the tenth folder searched
    nearer = write(deep.parent, {})
    assert find_mcp_config(deep) == nearer


def test_a_config_ten_ancestors_up_is_not_used(tmp_path: Path) -> None:
    write(tmp_path, {})
    deeper = tmp_path.joinpath(*[f"d{i}" for i in range(10)])
    deeper.mkdir(parents=True)
    assert find_mcp_config(deeper) is None


def test_stdio_and_http_entries_are_read_with_variables_filled(tmp_path: Path) -> None:
    path = write(tmp_path, {
        "toy": {"command": "rpent", "args": ["serve-mcp", "--robot", "${ROBOT:-toy}"], "env": {"K": "${SECRET}"}},
        "arm": {"type": "http", "url": "http://127.0.0.1:${PORT}/mcp", "headers": {"Authorization": "Bearer ${SECRET}"}},
    })
    toy, arm = load_mcp_config(path, environ={"SECRET": "s3", "PORT": "8765"})
    assert (toy.transport, toy.command, toy.args, toy.env) == ("stdio", "rpent", ["serve-mcp", "--robot", "toy"], {"K": "s3"})
    assert toy.cwd == str(tmp_path.resolve())  # servers run next to their config file
    assert (arm.transport, arm.url, arm.headers) == ("http", "http://127.0.0.1:8765/mcp", {"Authorization": "Bearer s3"})


@pytest.mark.parametrize(("servers", "message"), [
    ({"a": {"args": []}}, "mcpServers.a.type: must be 'stdio' or 'http'"),
    ({"a": {"command": ""}}, "mcpServers.a.command: a non-empty string is required"),
    ({"a": {"command": "x", "args": "serve"}}, "mcpServers.a.args: must be a list of strings"),
    ({"a": {"type": "http"}}, "mcpServers.a.url: a non-empty string is required"),
    ({"a": {"command": "${NOPE}"}}, "${NOPE}: environment variable NOPE is not set"),
])
def test_malformed_entries_are_refused_naming_the_entry_and_the_rule(tmp_path: Path, servers: dict,
                                                                     message: str) -> None:
    with pytest.raises(McpConfigError, match=re.escape(message)):
        load_mcp_config(write(tmp_path, servers), environ={})


def test_a_missing_explicit_config_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(McpConfigError, match=r"mcp_config_path: .* does not exist"):
        load_mcp_config(tmp_path / "absent.json")
