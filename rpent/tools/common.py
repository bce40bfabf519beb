"""The former name of `rpent.tools.common_tools` (the name the Core interfaces use); kept so older imports work."""

from rpent.tools.common_tools import COMMON_TOOLS, list_dir, read_image, read_text_file, write_text_file

__all__ = ["COMMON_TOOLS", "list_dir", "read_image", "read_text_file", "write_text_file"]
