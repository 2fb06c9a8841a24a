"""Observers for rigid bodies: world-space mesh vertices (the renderer's input)
and body poses (for state-space losses).  Both work with or without
checkpointing and are idempotent per frame (plain assignments)."""
import numpy as np
import taichi as ti

from .rigid_pose import body_position, body_rotation, quat_rotate
from ..core.runtime import deterministic, serial_loop


def _require_bodies(sim):
    if getattr(sim.model, "body_count", 0) == 0:
        raise ValueError("sim: the model has no rigid bodies (use SceneBuilder.add_rigid_body)")


@ti.data_oriented
class RigidSurface:
    """World-space vertices of every body's mesh, every `every` steps.

    Attributes:
        vertices: field (frames, V) vec3 [m], differentiable; frame k is step k * every
            (render frame k with `renderer.render(surface.vertices, k, k)`).
        faces: (F, 3) int32 numpy, all bodies concatenated, indices into `vertices`.
        face_body: (F,) int32 numpy, the body of each face.
        frames, vertex_count, face_count.
    """

    def __init__(self, sim, every=1):
        _require_bodies(sim)
        model = sim.model
        self.model = model
        start = model.body_vertex_start
        self.faces = np.concatenate([f + start[b] for b, f in enumerate(model.body_faces)]).astype(np.int32)
        self.face_body = np.concatenate([np.full(len(f), b) for b, f in enumerate(model.body_faces)]).astype(np.int32)
        self.vertex_count = int(start[-1])
        self.face_count = len(self.faces)
        self.frames = sim.frame_count(every)
        self.vertices = ti.Vector.field(3, float, shape=(self.frames, self.vertex_count),
                                        needs_grad=model.requires_grad)
        # in reverse, every vertex adds into its body's pose adjoint: in vertex order when deterministic
        self._serial = deterministic()
        sim.observe(self, every)

    def __call__(self, state, slot, frame):
        self._record(state.body_q, slot, frame)

    @ti.kernel
    def _record(self, body_q: ti.template(), slot: ti.i32, frame: ti.i32):
        ti.loop_config(serialize=ti.static(self._serial or serial_loop(self.vertex_count, 4)))
        for v in range(self.vertex_count):
            q = body_q[slot, self.model.vertex_body[v]]
            self.vertices[frame, v] = body_position(q) + quat_rotate(body_rotation(q), self.model.body_vertex[v])

    def numpy(self):
        """Recorded vertices, shape (frames, V, 3)."""
        return self.vertices.to_numpy()


@ti.data_oriented
class BodyRecorder:
    """Centre-of-mass positions and orientations of every body, every `every` steps.

    Attributes: `positions` field (frames, B) vec3 [m] and `rotations` field
    (frames, B) vec4 (x, y, z, w), both differentiable.
    """

    def __init__(self, sim, every=1):
        _require_bodies(sim)
        self.count = sim.model.body_count
        self.frames = sim.frame_count(every)
        grad = sim.model.requires_grad
        self.positions = ti.Vector.field(3, float, shape=(self.frames, self.count), needs_grad=grad)
        self.rotations = ti.Vector.field(4, float, shape=(self.frames, self.count), needs_grad=grad)
        sim.observe(self, every)

    def __call__(self, state, slot, frame):
        self._record(state.body_q, slot, frame)

    @ti.kernel
    def _record(self, body_q: ti.template(), slot: ti.i32, frame: ti.i32):
        ti.loop_config(serialize=ti.static(serial_loop(self.count)))
        for b in range(self.count):
            q = body_q[slot, b]
            self.positions[frame, b] = body_position(q)
            self.rotations[frame, b] = body_rotation(q)

    def numpy(self):
        """(positions (frames, B, 3), rotations (frames, B, 4))."""
        return self.positions.to_numpy(), self.rotations.to_numpy()
