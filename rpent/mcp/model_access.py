"""Which model RobotAgent asks, where and with which key: its arguments, then RPent's variables, then beambot's.

beambot's client (the RobotAgent scripts are written against) reads its gateway from $HERMES_ENDPOINT
(the Messages API served under `<endpoint>/anthropic`; its own gateway when unset), its key from
$AIFAPIM_API_KEY and its model from $BEAMBOT_MODEL. RobotAgent reads each of them after its own
(docs/mcp.md), so a beambot deployment's environment works unchanged.
"""

from __future__ import annotations

import os

from rpent.settings import MODEL_ENV, chosen_model, missing_key_message

DEFAULT_KEY_ENV = "ANTHROPIC_API_KEY"
BASE_URL_ENV = "ANTHROPIC_BASE_URL"
BEAMBOT_MODEL_ENV = "BEAMBOT_MODEL"
BEAMBOT_ENDPOINT_ENV = "HERMES_ENDPOINT"
BEAMBOT_KEY_ENV = "AIFAPIM_API_KEY"
#: The gateway beambot uses when $HERMES_ENDPOINT is unset, and where on a gateway the Messages API is.
BEAMBOT_DEFAULT_ENDPOINT = "https://hermes.nsls2.bnl.gov"
BEAMBOT_API_PATH = "/anthropic"


def agent_model(model: str | None) -> str:
    """`model`; if falsy (as beambot allows), $RPENT_MODEL, then $BEAMBOT_MODEL, then the default model."""
    if not model:
        model = _variable(MODEL_ENV) or _variable(BEAMBOT_MODEL_ENV) or None
    return chosen_model(model)


def endpoint_and_key(base_url: str | None, api_key: str | None, api_key_env: str) -> tuple[str | None, str]:
    """(base URL, None for the public Anthropic API; the key), refused naming the variable when there is no key.

    beambot's key is read only where RPent's default variable is empty (a variable named in
    `api_key_env` is the one to read, and a typo in it must not send another key), and it goes to
    beambot's gateway unless an endpoint is given: a gateway's key is never handed to another host.
    """
    key = api_key if api_key is not None else os.environ.get(api_key_env)
    beambots = False
    if not key and api_key is None and api_key_env == DEFAULT_KEY_ENV:
        key = os.environ.get(BEAMBOT_KEY_ENV)
        beambots = bool(key)
        if not key:
            raise ValueError(f"{missing_key_message(api_key_env)}; nor is beambot's {BEAMBOT_KEY_ENV}")
    if not key:
        raise ValueError(missing_key_message(api_key_env))
    if base_url is None:
        base_url = _variable(BASE_URL_ENV) or _beambot_gateway(default=beambots)
    return base_url, key


def _beambot_gateway(*, default: bool) -> str | None:
    endpoint = _variable(BEAMBOT_ENDPOINT_ENV) or (BEAMBOT_DEFAULT_ENDPOINT if default else None)
    return endpoint.rstrip("/") + BEAMBOT_API_PATH if endpoint else None


def _variable(name: str) -> str:
    return os.environ.get(name, "").strip()
