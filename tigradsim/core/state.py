"""Per-step state in Taichi fields: `particle_q[slot, i]`, `particle_qd[slot, i]`, ...

A StateStore holds `slots` copies of every state kind the model declares.
Full-storage rollouts use slots = steps + 1; checkpointed rollouts use a
working buffer of segment + 1 slots plus a store of checkpoints (one slot per
segment start, without the force accumulators).
"""

import taichi as ti

from .model import Model, new_field


@ti.data_oriented
class StateStore:
    """Fields named after the model's `StateKind`s, each of shape (slots, count).

    Attributes: `slots`, `kinds` (the StateKinds stored), and one field per kind
    (e.g. `store.particle_q`), with gradients when the model requires them.
    """

    def __init__(self, model: Model, slots: int, include_accumulators: bool = True):
        self.model = model
        self.slots = int(slots)
        self.kinds = [k for k in model.state_kinds if k.count > 0 and (include_accumulators or not k.accumulator)]
        for kind in self.kinds:
            setattr(self, kind.name, new_field(kind.dtype, (self.slots, kind.count), needs_grad=model.requires_grad))

    def fields(self, accumulators=None):
        """The state fields (optionally only accumulators, or only non-accumulators)."""
        return [getattr(self, k.name) for k in self.kinds if accumulators is None or k.accumulator == accumulators]

    def nbytes(self) -> int:
        """Bytes of all state fields, gradients included."""
        total = 0
        for kind in self.kinds:
            fld = getattr(self, kind.name)
            per = 8 if ti.lang.impl.get_runtime().default_fp == ti.f64 else 4
            n = 1
            for d in getattr(kind.dtype, "get_shape", lambda: ())() or ():
                n *= d
            total += self.slots * kind.count * n * per * (2 if self.model.requires_grad else 1)
        return total

    def numpy(self, name: str, slot: int):
        """Values of state `name` at `slot` as numpy, shape (count, ...)."""
        return getattr(self, name).to_numpy()[slot]
