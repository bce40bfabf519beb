"""An rclpy ActionClient safe to use from threads other than the executor's.

rclpy's ActionClient (Jazzy, Humble) sends a goal, cancel or result request and only then files the
future that its response completes. With a multi-threaded executor the response can be processed
in between: a goal response is dropped with "Ignoring unexpected goal response", a result response
silently, and the caller waits for ever. rclpy's service Client closes the same gap with a lock;
this does the same for actions: sending and filing happen under one lock, and response processing
waits for any send in progress to finish filing.
"""

from __future__ import annotations

import threading
from typing import Any

from rclpy.action import ActionClient


class ThreadSafeActionClient(ActionClient):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Before rclpy's constructor: it ends by registering the client with its node, and an executor
        # spinning that node may hand it a message at once (every goal status the server publishes).
        self._filing = threading.Lock()
        super().__init__(*args, **kwargs)

    def send_goal_async(self, *args: Any, **kwargs: Any) -> Any:
        with self._filing:
            return super().send_goal_async(*args, **kwargs)

    def _cancel_goal_async(self, goal_handle: Any) -> Any:
        with self._filing:
            return super()._cancel_goal_async(goal_handle)

    def _get_result_async(self, goal_handle: Any) -> Any:
        with self._filing:
            return super()._get_result_async(goal_handle)

    async def execute(self, taken_data: Any) -> None:
        with self._filing:  # a response taken while its request was being filed waits for the filing
            pass
        await super().execute(taken_data)
