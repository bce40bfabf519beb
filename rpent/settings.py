"""Settings shared by every part that talks to a model: the default model and its deprecation check.

One place, so the api planner, the claude_code planner, RobotAgent and the dashboard never disagree
about which model a run without `--model` uses.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import warnings

log = logging.getLogger(__name__)

#: The Anthropic model used when neither `--model` nor $RPENT_MODEL names one: the newest Sonnet
#: the pinned anthropic SDK lists, and one it does not mark deprecated (test_settings checks both).
DEFAULT_MODEL = "claude-sonnet-5-5"
MODEL_ENV = "RPENT_MODEL"
#: The OpenAI model the codex planner uses when `--model` names none (Codex speaks only OpenAI's API).
CODEX_DEFAULT_MODEL = "gpt-5.1-codex"

_warned: set[str] = set()
_lock = threading.Lock()


def default_model() -> str:
    """$RPENT_MODEL if set, else DEFAULT_MODEL."""
    return os.environ.get(MODEL_ENV, "").strip() or DEFAULT_MODEL


def deprecated_models() -> dict[str, str]:
    """Model name -> end-of-life date, as the installed anthropic SDK lists them (empty without it)."""
    try:
        from anthropic.resources.messages import DEPRECATED_MODELS
    except ImportError:
        return {}
    return dict(DEPRECATED_MODELS)


def check_model(model: str) -> None:
    """Warn once per process that `model` is deprecated, and silence the SDK's warning on every request."""
    end_of_life = deprecated_models().get(model)
    if end_of_life is None:
        return
    with _lock:
        if model in _warned:
            return
        _warned.add(model)
        warnings.filterwarnings("ignore", message=rf"The model '{re.escape(model)}' is deprecated",
                                category=DeprecationWarning)
    log.warning("model %s is deprecated (end of life %s): choose a current one with --model or $%s "
                "(default %s)", model, end_of_life, MODEL_ENV, DEFAULT_MODEL)


def chosen_model(model: str | None) -> str:
    """`model`, else the default model: refused unless a non-empty name, warned about if deprecated."""
    model = default_model() if model is None else model
    if not isinstance(model, str) or not model:
        raise ValueError(f"model: must be a non-empty model name, got {model!r}")
    check_model(model)
    return model


def api_key_from(api_key: str | None, api_key_env: str, *, required: bool = True) -> str | None:
    """`api_key` if given, else the value of the variable `api_key_env`; refused, naming the
    variable, when `required` and neither holds a key."""
    key = api_key if api_key is not None else os.environ.get(api_key_env)
    if not key and required:
        raise ValueError(missing_key_message(api_key_env))
    return key


def missing_key_message(api_key_env: str) -> str:
    """The refusal when the API key's variable is empty; `rpent run` names the option as its flag."""
    return f"api_key_env: environment variable {api_key_env} is not set (export {api_key_env}=<key>, or name another variable)"
