"""Reading a tree's imports without importing anything: every `import`, `from ... import` (module level,
inside functions, under TYPE_CHECKING) and `importlib.import_module("literal")` / `__import__("literal")`,
with `ast`. The architecture tests (test_architecture.py, test_architecture_units.py) judge what it finds.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("rpent", "rpent_ros", "robots")


@dataclass(frozen=True)
class Import:
    path: str  # relative to the scanned root
    line: int
    source: str  # the import as written
    target: str  # absolute dotted module it names



def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def resolve_relative(module: str | None, level: int, importer: str, is_package: bool) -> str:
    if level == 0:
        return module or ""
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def literal_import(node: ast.Call) -> str | None:
    func = node.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    if name not in ("import_module", "__import__") or not node.args:
        return None
    first = node.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str) and not first.value.startswith("."):
        return first.value
    return None  # a name built at run time: discovery by name, which the rules allow


def imports_in(source: str, importer: str, *, path: str, is_package: bool = False) -> Iterator[Import]:
    tree = ast.parse(source, filename=path)
    lines = source.splitlines()
    for node in ast.walk(tree):
        written = lines[node.lineno - 1].strip() if hasattr(node, "lineno") else ""
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(path, node.lineno, written, alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = resolve_relative(node.module, node.level, importer, is_package)
            for alias in node.names:
                # `from rpent import dashboard` names the package rpent.dashboard, not rpent.
                yield Import(path, node.lineno, written, base if alias.name == "*" else f"{base}.{alias.name}")
        elif isinstance(node, ast.Call):
            target = literal_import(node)
            if target is not None:
                yield Import(path, node.lineno, written, target)


def write_tree(tmp_path: Path, files: dict[str, str]) -> Path:
    """Write `files` (path -> text, dedented) under `tmp_path`: a planted tree for a rule's self-test."""
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return tmp_path
