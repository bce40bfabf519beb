"""`python -m robots.franka.sim`: the simulator alone, for clients in other processes (see simulator.main)."""

from robots.franka.sim.simulator import main

raise SystemExit(main())
