"""A Franka arm driven by a VLA policy (an openpi DROID server), in a room of its own.

- `droid`: DROID's convention (what a policy is sent, what its actions mean);
- `step_safety`: one streamed step shaped to the arm's limits and checked against its envelope;
- `stream`: a chunk streamed at the control rate beside the arm, each step braking by itself;
- `loop`: observe, infer, execute a chunk, again (the run_policy tool);
- `client`: each arm's policy bound to its openpi client, hand and cameras.
"""
