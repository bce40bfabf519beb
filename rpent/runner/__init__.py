"""Run orchestration: start a runtime, run one task through a planner to a saved record, stop the runtime."""
