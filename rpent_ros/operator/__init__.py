"""The operator side: the dashboard, MCP bridge and planner nodes, which drive a toolkit_node from outside."""
