"""The core: Taichi runtime and precision, errors, the Model and its builder, the per-step state store,
the simulator, stability checks, the material registry and the shared matrix helpers."""
