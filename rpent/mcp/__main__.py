"""`python -m rpent.mcp --robot NAME [--http]`: the same as `rpent serve-mcp`."""

from rpent.mcp.cli import main

raise SystemExit(main())
