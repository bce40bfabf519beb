"""The one place that turns camera frames into sensor_msgs/Image and back, through cv_bridge.

Colour frames go out as rgb8 and grey frames as mono8 (`camera_topics.image_encoding` picks, without
ROS), depth as 32FC1 metres; subscribers read any encoding cv_bridge can convert (rgb8, bgr8, mono8, rgba8, ...) back as
RGB pixels.
"""

from __future__ import annotations

import numpy as np
from builtin_interfaces.msg import Time
from cv_bridge import CvBridge, CvBridgeError
from sensor_msgs.msg import Image
from std_msgs.msg import Header

from rpent.tools.images import decode_png
from rpent_ros.runtime.camera_topics import image_encoding

# CvBridge keeps only lookup tables built in __init__, so one instance serves every thread.
_bridge = CvBridge()


def frame_to_image_msg(frame: np.ndarray, *, stamp: Time, frame_id: str) -> Image:
    """An Image message (rgb8 for HxWx3/HxWx4, mono8 for HxW) stamped `stamp` in frame `frame_id`."""
    pixels, encoding = image_encoding(frame)
    return _bridge.cv2_to_imgmsg(pixels, encoding=encoding, header=Header(stamp=stamp, frame_id=frame_id))


def depth_to_image_msg(depth_m: np.ndarray, *, stamp: Time, frame_id: str) -> Image:
    """A 32FC1 Image of an H x W depth image in metres (NaN: no reading, as REP 118 has it)."""
    pixels = np.ascontiguousarray(depth_m, dtype=np.float32)
    if pixels.ndim != 2:
        raise ValueError(f"depth image: must be H x W, got shape {pixels.shape}")
    return _bridge.cv2_to_imgmsg(pixels, encoding="32FC1", header=Header(stamp=stamp, frame_id=frame_id))


def png_to_image_msg(png: bytes, *, stamp: Time, frame_id: str) -> Image:
    """An Image message with the pixels of a PNG (as written by rpent.tools.images.encode_png)."""
    return frame_to_image_msg(decode_png(png), stamp=stamp, frame_id=frame_id)


def image_msg_to_rgb(msg: Image) -> np.ndarray:
    """The HxWx3 RGB pixels of an Image message in any colour or grey 8-bit encoding cv_bridge converts."""
    try:
        return _bridge.imgmsg_to_cv2(msg, desired_encoding="rgb8")
    except CvBridgeError as exc:
        raise ValueError(f"image encoding {msg.encoding!r}: cannot be shown as rgb8 ({exc})") from None
