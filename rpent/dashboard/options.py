"""The dashboard's command-line flags; defined with the other run options in rpent.runner.options."""

from rpent.runner.options import DEFAULT_PORT, TOKEN_ENV, add_dashboard_args

__all__ = ["DEFAULT_PORT", "TOKEN_ENV", "add_dashboard_args"]
