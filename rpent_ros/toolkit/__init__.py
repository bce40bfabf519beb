"""The toolkit side: toolkit_node serves a robot's Toolkit as CallTool actions; RosToolkit is their client."""
