"""Hand-eye calibration of the Franka's cameras: `rpent calibrate --robot franka`."""
