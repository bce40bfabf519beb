"""Planners: an Anthropic API loop, Claude Code, Codex and recipe replay behind one contract (base)."""
