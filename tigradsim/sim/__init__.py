"""Assembling and running a scene: the builder (`SceneBuilder` -> `Model`), the simulator, batched copies
of a model (`Batch`) and the substep count per video frame (`timing`)."""
