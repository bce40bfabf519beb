"""Python logging -> ROS logging, so rpent's messages (with their causes) show in ros2 launch output."""

from __future__ import annotations

import logging

from rclpy.logging import get_logger

from rpent.record.values import utf8_text


class _RosHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        logger = get_logger(record.name.replace(".", "_"))
        message = utf8_text(self.format(record))  # rcutils takes UTF-8: a lone surrogate would drop the line
        if record.levelno >= logging.ERROR:
            logger.error(message)
        elif record.levelno >= logging.WARNING:
            logger.warning(message)
        elif record.levelno >= logging.INFO:
            logger.info(message)
        else:
            logger.debug(message)


def forward_python_logging(level: int = logging.INFO) -> None:
    root = logging.getLogger()
    if any(isinstance(h, _RosHandler) for h in root.handlers):
        return
    handler = _RosHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.addFilter(lambda record: record.name.startswith(("rpent", "robots")) or record.levelno >= logging.WARNING)
    root.addHandler(handler)
    root.setLevel(min(root.level or level, level))
