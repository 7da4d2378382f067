"""Board simulator: writes a live CANN msprof PROF_ directory for a face-mask SSD detector.

`simulate()` writes one run; `SimulatorStage` runs it as a pipeline source.
"""

from stages.simulator.run import Simulation, simulate

__all__ = ["Simulation", "simulate"]
