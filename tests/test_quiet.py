"""Quiet output: `import tigradsim` keeps stdout clean (Taichi's banner goes to stderr), and a
user material written with `@` compiles without Taichi's AD warnings (tigradsim/core/quiet_matmul.py)."""
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _python(code, tmp_path, *args, timeout=600):
    """Run `code` as a script file (Taichi reads the source of the functions it compiles)."""
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(code))
    env = dict(os.environ)
    env.pop("ENABLE_TAICHI_HEADER_PRINT", None)
    return subprocess.run([sys.executable, str(script), *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.slow
def test_import_prints_nothing_on_stdout(tmp_path):
    r = _python("import tigradsim", tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    assert "[Taichi] version" in r.stderr           # the banner is kept, on stderr
    r = _python("import os, tigradsim; print(os.environ.get('ENABLE_TAICHI_HEADER_PRINT'))", tmp_path)
    assert r.stdout.strip() == "None"                # the switch is not left set for child processes
    r = _python("import tigradsim as tgs; tgs.init(precision='f64')", tmp_path)
    assert r.returncode == 0 and r.stdout == "", r.stdout   # "[Taichi] Starting on arch=..." goes to stderr
    assert "Starting on arch" in r.stderr


# A St. Venant-Kirchhoff material written the natural way, with `@`; the offline cache is off so that
# every kernel compiles here (Taichi prints its AD warnings while compiling, not on a cache hit).
# The warnings come from reverse-mode kernels that inline the material inside a loop (the FEM
# step); one kernel without such a loop compiles quietly either way (measured).
AT_MATERIAL = """
import sys
import numpy as np, taichi as ti
QUIET_OFF = "--without-fix" in sys.argv
if QUIET_OFF:                     # measure what Taichi prints without tigradsim's scope
    import tigradsim.core.quiet_matmul as q
    q.quiet_matmul_scope = lambda fn: fn
import tigradsim as tgs
import tigradsim.core.registry
if QUIET_OFF:
    tigradsim.core.registry.quiet_matmul_scope = lambda fn: fn
from tigradsim.core.registry import TetMaterial, register_material
tgs.init(precision="f64", offline_cache=False)

@register_material("user_stvk_at")
class UserStVK(TetMaterial):
    params = {"mu": 1e3, "lam": 1e3}

    @ti.func
    def stress(self, F, p):
        I = ti.Matrix.identity(float, 3)
        E = 0.5 * (F.transpose() @ F - I)
        return F @ (2.0 * p[0] * E + p[1] * E.trace() * I)

    @ti.func
    def energy(self, F, p):
        E = 0.5 * (F.transpose() @ F - ti.Matrix.identity(float, 3))
        n = F @ ti.Vector([0.0, 0.0, 1.0])              # matrix @ vector, unused but compiled
        return p[0] * E.norm_sqr() + 0.5 * p[1] * E.trace() ** 2 + 0.0 * n.dot(n)

def rollout_gradient(material):
    # a soft cube thrown at the ground, its loss differentiated w.r.t. the material parameters:
    # the FEM step's reverse kernels inline the material's functions (where Taichi used to warn)
    v, t = tgs.meshes.tet_box(1, 1, 1, size=(0.1, 0.1, 0.1), origin=(0, 0.05, 0))
    b = tgs.SceneBuilder()
    b.add_ground()
    b.add_soft_mesh((v, t), material=material, density=1000.0, velocity=(0.3, -1.0, 0.2))
    model = b.finalize(requires_grad=True)
    sim = tgs.Simulator(model, dt=1e-3, steps=5)
    rec = tgs.ParticleRecorder(sim, every=5)
    sim.run()
    loss = tgs.MSELoss(rec.values, rec.numpy() + 0.01)
    with ti.ad.Tape(loss.value):
        loss.value[None] = 0
        sim.run()
        loss()
    return model.tet_params.grad.to_numpy()

F = np.array([[1.1, 0.2, 0.0], [0.0, 0.9, 0.1], [0.05, 0.0, 1.2]])
same_stress = np.array_equal(tgs.registry.evaluate_stress("user_stvk_at", F), tgs.registry.evaluate_stress("stvk", F))
same_energy = np.array_equal(tgs.registry.evaluate_energy("user_stvk_at", F), tgs.registry.evaluate_energy("stvk", F))
g = rollout_gradient("user_stvk_at")
print("RESULT", same_stress, same_energy, bool(np.isfinite(g).all()), float(np.abs(g).max()))
"""


@pytest.mark.slow
def test_material_written_with_at_compiles_quietly_and_equals_builtin(tmp_path):
    r = _python(AT_MATERIAL, tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Loading variable" not in r.stderr and "TaichiWarning" not in r.stderr, r.stderr[-3000:]
    result = r.stdout.split("RESULT")[-1].split()
    assert result[:3] == ["True", "True", "True"], r.stdout      # the same values as the matmul-helper built-in
    assert float(result[3]) > 0
    # Without the scope (measured with QUIET_OFF: run this script with --without-fix) the same
    # rollout printed 216 "Loading variable ... before anything is stored" TaichiWarnings.



def test_at_outside_materials_keeps_taichis_meaning():
    """The swap is scoped to material functions: `@` in an ordinary kernel still compiles
    through Taichi's own matmul (and the module attribute is restored after compiling)."""
    import taichi as ti
    from taichi.lang import matrix_ops
    import tigradsim as tgs
    from tigradsim.core import quiet_matmul
    tgs.init(precision="f64")
    assert matrix_ops.matmul is quiet_matmul._taichi_matmul
    out = ti.Matrix.field(3, 3, ti.f64, shape=())

    @ti.kernel
    def k():
        a = ti.Matrix([[1.0, 2.0, 0.0], [0.0, 1.0, 3.0], [4.0, 0.0, 1.0]])
        out[None] = a @ a.transpose()

    k()
    import numpy as np
    a = np.array([[1.0, 2.0, 0.0], [0.0, 1.0, 3.0], [4.0, 0.0, 1.0]])
    assert np.array_equal(out.to_numpy(), a @ a.T)
    assert matrix_ops.matmul is quiet_matmul._taichi_matmul
