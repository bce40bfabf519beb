"""The two-arm Franka's prompts, prompts/system.md and prompts/user.md, as the PromptBundle its spec uses."""

from __future__ import annotations

from pathlib import Path

from rpent.robot import PromptBundle

PROMPTS = Path(__file__).parent / "prompts"
PROMPT_BUNDLE = PromptBundle.from_files(PROMPTS / "system.md", PROMPTS / "user.md")
system_prompt = PROMPT_BUNDLE.system  # (prompt_vars) -> str
user_prompt = PROMPT_BUNDLE.user
