"""The model a run uses without --model: one current default, overridable by $RPENT_MODEL, and a
deprecated model is named once per run, not once per request."""

from __future__ import annotations

import typing

import pytest
from fakes import FakeModelServer, Reply, ToolUse

from rpent import settings

from .cli_support import rpent, rpent_env


def _two_turns() -> list[Reply]:
    return [Reply([ToolUse("get_state")]),
            Reply([ToolUse("finish", {"status": "failure", "summary": "only looked"})])]


def _run_api(server: FakeModelServer, tmp_path, *flags: str, **env: str):
    return rpent("run", "--robot", "toy", "--planner", "api", "--base-url", server.base_url,
                 "--output-dir", str(tmp_path / "run"), *flags,
                 env=rpent_env(ANTHROPIC_API_KEY="test-key", PYTHONWARNINGS="default", **env))


def test_default_model_is_known_to_the_pinned_sdk_and_not_deprecated():
    from anthropic.types.model import Model

    known = typing.get_args(typing.get_args(Model)[0])
    assert settings.DEFAULT_MODEL in known
    assert settings.DEFAULT_MODEL not in settings.deprecated_models()


@pytest.mark.parametrize(("env", "expected"), [({}, settings.DEFAULT_MODEL), ({"RPENT_MODEL": "claude-opus-4-8"}, "claude-opus-4-8")])
def test_run_without_model_uses_the_default_or_rpent_model(tmp_path, env, expected):
    with FakeModelServer(_two_turns()) as server:
        done = _run_api(server, tmp_path, **env)
        models = {r.body["model"] for r in server.model_requests}
    assert done.returncode == 1, done.stderr  # finish(failure): the run says so
    assert models == {expected}
    assert "is deprecated" not in done.stderr


def test_a_deprecated_model_is_named_once_per_run_not_per_request(tmp_path):
    deprecated = next(iter(settings.deprecated_models()))
    with FakeModelServer(_two_turns()) as server:
        done = _run_api(server, tmp_path, "--model", deprecated)
        requests = len(server.model_requests)
    assert requests == 2
    warnings = [line for line in done.stderr.splitlines() if "is deprecated" in line]
    assert len(warnings) == 1, done.stderr
    assert deprecated in warnings[0] and "--model" in warnings[0] and "RPENT_MODEL" in warnings[0]


def test_missing_key_names_the_variable_and_the_flag_not_a_python_argument(tmp_path):
    done = rpent("run", "--robot", "toy", "--planner", "api", "--output-dir", str(tmp_path / "run"))
    assert done.returncode == 2
    assert "rpent: error: --api-key-env: environment variable ANTHROPIC_API_KEY is not set" in done.stderr
    assert "export ANTHROPIC_API_KEY=" in done.stderr
    assert "api_key=" not in done.stderr


def test_a_planner_option_refused_is_named_as_the_flag(tmp_path):
    done = rpent("run", "--robot", "toy", "--planner", "api", "--max-wall-time", "-5",
                 "--output-dir", str(tmp_path / "run"), env=rpent_env(ANTHROPIC_API_KEY="test-key"))
    assert done.returncode == 2
    assert "rpent: error: --max-wall-time: must be a positive number, got -5.0" in done.stderr
    assert not (tmp_path / "run").exists()
