"""The Franka's devices: franky's arm and hand clients and RealSense cameras."""
