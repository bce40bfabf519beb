"""franky-sim in this process: the simulated FR3 arms, their MuJoCo world and its scenes."""
