"""The README and docs/ send readers only to documents that exist in the project."""

from __future__ import annotations

import re

from .cli_support import REPO

# Files of other tools that the docs mention by name, not documents of this project.
OTHER_TOOLS_FILES = {"CLAUDE.md", "AGENTS.md"}
# A project document: an upper-case name (README.md, FACTS.md) or a path under docs/.
PROJECT_DOC = re.compile(r"(?<![\w/.-])((?:docs/)?[A-Z][A-Z0-9_-]*\.md|docs/[\w./-]+\.md)\b")


def test_every_project_document_the_docs_name_exists():
    missing = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for name in set(PROJECT_DOC.findall(page.read_text())) - OTHER_TOOLS_FILES:
            if not any(p.exists() for p in (REPO / name, page.parent / name, REPO / "docs" / name)):
                missing.append(f"{page.relative_to(REPO)}: {name}")
    assert not missing, missing
