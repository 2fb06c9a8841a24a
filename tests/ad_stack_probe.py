"""Test helper, run as a script by tests/test_no_ad_stacks.py: one taped rollout of a small scene (f32,
serial scatter, every gradient) with Taichi printing the IR of every kernel it compiles.

    python tests/ad_stack_probe.py {cloth,fem,rigid,boxes,springs,render,control}

Taichi's reverse mode keeps a local that is stored more than once under a branch (`f += x` inside
an `if`, or Python's `or` / `and`, which compile to such a branch) on an AD stack, pushed and popped
per iteration; the test counts the stacks in the printed IR ("stack alloc").
"""
import sys

import numpy as np
import taichi as ti

import tigradsim as tgs


def scene(name):
    """(run, loss): a taped rollout of a few steps of scene `name`."""
    loss = ti.field(float, shape=(), needs_grad=True)
    if name == "control":
        # a local added to under a branch: the pattern that needs an AD stack (the test's positive control)
        x = ti.field(float, shape=4, needs_grad=True)
        x.from_numpy(np.array([0.5, 1.5, -1.0, 2.0], np.float32))

        @ti.kernel
        def branchy():
            ti.loop_config(serialize=True)
            for i in range(4):
                f = 0.0
                for p in ti.static(range(2)):
                    if x[i] > p:
                        f += x[i] * (p + 1)
                loss[None] += f
        return branchy, loss
    b = tgs.SceneBuilder()
    b.add_ground()
    if name == "render":
        from tigradsim.renderers import Camera, SoftRasterizer
        v, f = tgs.meshes.icosphere(1)
        verts = ti.Vector.field(3, float, shape=(1, len(v)), needs_grad=True)
        verts.from_numpy(np.asarray(v, np.float32)[None])
        cam = Camera(eye=(0.0, 0.0, 3.0), target=(0.0, 0.0, 0.0), fov=45, width=16, height=16)
        renderers = [SoftRasterizer(cam, f, len(v), sigma=1e-3),
                     SoftRasterizer(cam, f, len(v), sigma=1e-3, shading="lambert", normals="smooth")]

        @ti.kernel
        def total(image: ti.template()):
            for I in ti.grouped(image):
                loss[None] += image[I].sum()

        def run():
            for ren in renderers:
                ren.render(verts, 0, 0)
                total(ren.image)
        return run, loss
    if name == "cloth":
        v, f = tgs.meshes.cloth_grid(3, 3, cell=0.1, origin=(0.0, 0.3, 0.0), plane="xz")
        b.add_cloth(v, f, params={"mu": 10.0, "lam": 20.0, "damping": 0.1}, density=1.0, bending_stiffness=1e-4,
                    bending_damping=1e-6, drag=0.1, lift=0.1)
    elif name == "fem":
        b.add_soft_mesh(tgs.meshes.tet_box(2, 1, 1, size=(0.2, 0.1, 0.1), origin=(0.0, 0.05, 0.0)),
                        params={"mu": 1e3, "lam": 1e3, "damping": 0.05}, density=100.0)
    elif name in ("rigid", "boxes"):
        v, f = tgs.meshes.box_surface((0.2, 0.1, 0.1))
        b.add_rigid_body(v, f, density=100.0, position=(0.0, 0.06, 0.0), angular_velocity=(1.0, 2.0, 0.5))
        # two boxes: corner and edge-edge contact.  Not in test_no_ad_stacks yet: measured 2,876 stack allocations
        # with corner contact alone (body_contact.py's branches), 3,052 with box_edges.py's term as well
        if name == "boxes":
            b.add_rigid_body(v, f, density=100.0, position=(0.0, 0.2, 0.0), rotation=(0.0, 0.3826834, 0.0, 0.9238795))
    elif name == "springs":
        x = np.array([[0.0, 0.1, 0.0], [0.1, 0.2, 0.0], [0.2, 0.1, 0.05]])
        b.add_particles(x, np.zeros((3, 3)), np.ones(3), radius=0.01)
        b.add_springs([[0, 1], [1, 2]], 100.0, 1.0)
    else:
        raise SystemExit(f"unknown scene {name!r}")
    model = b.finalize()
    sim = tgs.Simulator(model, dt=1e-3, steps=3)
    q = sim.state.body_q if name in ("rigid", "boxes") else sim.state.particle_q

    @ti.kernel
    def last():
        for i in range(q.shape[1]):
            loss[None] += q[3, i][1]

    def run():
        sim.run()
        last()
    return run, loss


if __name__ == "__main__":
    tgs.init(precision="f32", scatter="serial", print_ir=True)
    run, loss = scene(sys.argv[1])
    with tgs.tape(loss):
        run()
    print("probe finished", flush=True)
