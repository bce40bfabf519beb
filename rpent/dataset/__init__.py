"""Training data from run records: `rpent export lerobot` (command.py).

    episodes.py      which runs become episodes, and each episode's frames on a fixed-rate grid
    conventions.py   the features: DROID's names and units (openpi), or RPent's own
    lerobot_v3.py    the LeRobotDataset v3.0 layout, written with pyarrow and PyAV (no torch)
    command.py       the command: options, checks, written aside then renamed

It reads the record's stream (rpent.record.stream) and nothing else of the run but its result.json.
"""

#: --convention: RPent's own feature names, or DROID's (openpi's LeRobotDROIDDataConfig).
CONVENTIONS = ("rpent", "droid")
