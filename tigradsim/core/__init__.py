"""The ground floor: Taichi runtime and precision, errors, the Model and the per-step state store,
stability checks, the material registry, the shared matrix helpers, the tape and the mesh validity
checks (`geometry`).  It imports nothing above itself."""
