"""The run's record: one home for everything a run writes into its output directory.

    segments.py      segments.jsonl: claiming a directory for one run, and continuing it (--resume)
    run_record.py    RunRecord, what entry points hold: run.log, transcript.json, result.json
    step_record.py   StepRecord, one tool call as the record keeps it
    steps.py         steps.jsonl: StepLog writes one line per StepRecord; read_steps, saved_value read
    step_line.py     how one line stays strict JSON, valid UTF-8 and at most 64 KiB, whatever it holds
    images.py        images/: every image a tool returned, named by step, tool and camera
    video.py         episode.mp4 and clips/, written so that a crash leaves a playable file
    video_tiles.py   several cameras in one labelled frame
    stream.py        stream/: the fixed-rate samples (state, action, every camera's frame) training data comes from
    run_log.py       run.log: everything logged while the record is open, and failures
    atomic.py        the atomic writer (result.json, transcript.json, recipes)
    values.py        how any value and any exception is written down as text or JSON

Nothing here imports the toolkit (rpent.tools) or anything above it: the toolkit writes the record.
"""
