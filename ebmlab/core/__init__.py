"""The core: chain state, typed protocols, the run context and THE run loop."""
