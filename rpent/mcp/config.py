"""`.mcp.json`: finding it and reading its server entries (the format Claude Code uses).

```json
{"mcpServers": {
  "toy":  {"command": "rpent", "args": ["serve-mcp", "--robot", "toy", "--read-image"], "env": {"K": "v"}},
  "arm":  {"type": "http", "url": "http://127.0.0.1:8765/mcp", "headers": {"Authorization": "Bearer ${ARM_TOKEN}"}}
}}
```

`${VAR}` and `${VAR:-default}` in command, args, env, cwd, url and headers are filled from the
environment. A stdio server runs in the config file's directory unless it names a `cwd`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

CONFIG_NAME = ".mcp.json"
#: The current directory and up to this many ancestors are searched.
MAX_ANCESTORS = 9

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class McpConfigError(ValueError):
    """The config file is malformed; the message names the file, the entry and the rule."""


class McpConfigMissing(McpConfigError, FileNotFoundError):
    """The named config file does not exist (a FileNotFoundError, as scripts written for beambot expect)."""


@dataclass(frozen=True)
class McpServerConfig:
    name: str
    transport: Literal["stdio", "http"]
    command: str = ""
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)


def find_mcp_config(start: str | Path | None = None) -> Path | None:
    """The nearest `.mcp.json` in `start` (default: the current directory) or its nine nearest ancestors."""
    here = Path(start if start is not None else os.getcwd()).resolve()
    for folder in [here, *here.parents][: MAX_ANCESTORS + 1]:
        candidate = folder / CONFIG_NAME
        if candidate.is_file():
            return candidate
    return None


def load_mcp_config(path: str | Path, environ: Mapping[str, str] | None = None) -> list[McpServerConfig]:
    """Parse a `.mcp.json` file into server entries, in file order."""
    path = Path(path)
    env = os.environ if environ is None else environ
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise McpConfigMissing(f"mcp_config_path: {path} does not exist") from None
    except json.JSONDecodeError as exc:
        raise McpConfigError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("mcpServers", {}), dict):
        raise McpConfigError(f"{path}: must be a JSON object with an object 'mcpServers'")
    servers = []
    for name, entry in raw.get("mcpServers", {}).items():
        servers.append(_server(path, name, entry, env))
    return servers


def _server(path: Path, name: str, entry: Any, env: Mapping[str, str]) -> McpServerConfig:
    where = f"{path}: mcpServers.{name}"
    if not isinstance(entry, dict):
        raise McpConfigError(f"{where}: must be an object")
    kind = entry.get("type", "stdio" if "command" in entry else "http" if "url" in entry else None)
    if kind in ("http", "streamable-http", "streamable_http"):
        url = entry.get("url")
        if not isinstance(url, str) or not url:
            raise McpConfigError(f"{where}.url: a non-empty string is required for an http server")
        return McpServerConfig(name=name, transport="http", url=_fill(url, env),
                               headers=_strings(entry.get("headers", {}), f"{where}.headers", env))
    if kind != "stdio":
        raise McpConfigError(f"{where}.type: must be 'stdio' or 'http', got {kind!r}")
    command = entry.get("command")
    if not isinstance(command, str) or not command:
        raise McpConfigError(f"{where}.command: a non-empty string is required for a stdio server")
    args = entry.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise McpConfigError(f"{where}.args: must be a list of strings")
    cwd = entry.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise McpConfigError(f"{where}.cwd: must be a string")
    folder = path.resolve().parent
    return McpServerConfig(
        name=name, transport="stdio", command=_fill(command, env), args=[_fill(a, env) for a in args],
        env=_strings(entry.get("env", {}), f"{where}.env", env),
        cwd=str(folder / _fill(cwd, env)) if cwd else str(folder),
    )


def _strings(value: Any, where: str, env: Mapping[str, str]) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise McpConfigError(f"{where}: must be an object of strings")
    return {k: _fill(v, env) for k, v in value.items()}


def _fill(text: str, env: Mapping[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in env:
            return env[name]
        if default is not None:
            return default
        raise McpConfigError(f"${{{name}}}: environment variable {name} is not set (write ${{{name}:-default}} for a default)")

    return _VAR.sub(value, text)
