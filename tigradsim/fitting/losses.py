"""State-space losses (the 3D-supervised baseline and control objectives).

A loss object owns a 0-D field `value` (use it as `ti.ad.Tape(loss.value)`)
and is called after the rollout to accumulate into it.  Image losses live in
`tigradsim.renderers`.
"""
import numpy as np
import taichi as ti

from ..core.errors import as_array
from ..core.runtime import deterministic, np_float


@ti.data_oriented
class MSELoss:
    """Mean squared distance between recorded vec3 values and targets.

    loss = sum_k w_k sum_i |x[k, i] - target[k, i]|^2 / (sum_k w_k * M)

    Args:
        source: field (frames, M) or (frames,) of vec3 (e.g. a recorder's `values` or `com`).
        target: numpy array of the same shape plus a trailing 3.
        frame_weights: (frames,) weights; default all frames 1.  Use e.g.
            `[0, ..., 0, 1]` to score only the last frame.
    """

    def __init__(self, source, target, frame_weights=None):
        shape = tuple(source.shape)
        self.source = source
        self.frames = shape[0]
        self.items = shape[1] if len(shape) > 1 else 1
        self.target = ti.Vector.field(3, float, shape=shape)
        self.target.from_numpy(np.ascontiguousarray(as_array("target", target, shape=shape + (3,)), dtype=np_float()))
        w = np.ones(self.frames) if frame_weights is None else as_array("frame_weights", frame_weights, shape=(self.frames,))
        if np.any(w < 0) or w.sum() <= 0:
            raise ValueError(f"frame_weights: must be >= 0 with a positive sum, got {w.tolist()}")
        self.weights = ti.field(float, shape=self.frames)
        self.weights.from_numpy((w / (w.sum() * self.items)).astype(np_float()))
        self.value = ti.field(float, shape=(), needs_grad=True)
        self._two_d = len(shape) > 1
        # the sum runs in a fixed order when deterministic (threads would add into `value` in any order)
        self._serial = deterministic()

    def __call__(self):
        self._accumulate()
        return self

    @ti.kernel
    def _accumulate(self):
        # range-for over a flat index: Taichi ignores `serialize` on a struct-for (`for k, i in field`)
        if ti.static(self._two_d):
            ti.loop_config(serialize=self._serial)
            for n in range(self.frames * self.items):
                k, i = n // self.items, n % self.items
                d = self.source[k, i] - self.target[k, i]
                self.value[None] += self.weights[k] * d.dot(d)
        else:
            ti.loop_config(serialize=self._serial)
            for k in range(self.frames):
                d = self.source[k] - self.target[k]
                self.value[None] += self.weights[k] * d.dot(d)
