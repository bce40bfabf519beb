"""`rpent eval`: benchmark sweeps of ordinary runs as Ray tasks, resumable, summarised with Wilson intervals.

sweep.py (what to run) -> schedule.py (Ray tasks; cluster.py starts or joins Ray) -> episode.py (one
run through rpent.runner) -> records.py (the sweep folder) -> results.py / plot.py (the summary).
"""
