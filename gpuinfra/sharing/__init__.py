"""GPU sharing: MIG layouts and plans, MPS, and their verdicts."""
