"""README.md's code runs as pasted and does what it says (issue 19, item 3).

"A short tour" is the python code between the markers `<!-- tour:begin -->` and `<!-- tour:end -->` in
README.md (every ```python block in between, in order: that is what a reader copies).  It runs in a fresh
interpreter, in an empty folder, and must exit 0, print a negative d loss / d mass at the light initial guess
(the target box is heavier, so adding mass lowers the loss), print the optimiser's progress, and fit the mass
to within 0.5 % of the truth it states.

"Write a material" (between `<!-- material:begin -->` and `<!-- material:end -->`) must register a material
whose stress is the derivative of its energy and that a soft body can use.
"""
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def snippet_code(text, name="tour"):
    """The python source of the marked snippet `name`: the ```python blocks between its markers, joined."""
    BEGIN, END = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    assert text.count(BEGIN) == 1 and text.count(END) == 1, \
        f"README.md must contain {BEGIN!r} and {END!r} exactly once each, around the snippet's code"
    region = text[text.index(BEGIN) + len(BEGIN):text.index(END)]
    blocks = re.findall(r"^```python[ \t]*\n(.*?)^```[ \t]*$", region, flags=re.S | re.M)
    assert blocks, f"no ```python block between the markers {BEGIN!r} and {END!r}"
    return "\n".join(blocks)


def test_tour_code_is_found():
    """The extraction finds exactly the marked blocks, not the README's other python snippets."""
    BEGIN, END = "<!-- tour:begin -->", "<!-- tour:end -->"
    text = "```python\nother = 1\n```\n" + BEGIN + "\ntext\n```python\na = 1\n```\nmore\n```python\nb = a\n```\n" \
        + END + "\n```python\nlater = 2\n```\n"
    assert snippet_code(text) == "a = 1\n\nb = a\n"
    with pytest.raises(AssertionError):
        snippet_code("no markers")


@pytest.mark.slow
def test_readme_tour_runs_as_pasted(tmp_path):
    code = snippet_code(README.read_text())
    script = tmp_path / "tour.py"
    script.write_text(code)
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    out = proc.stdout
    assert proc.returncode == 0, f"the README tour failed (exit {proc.returncode}):\n{out}\n{proc.stderr[-4000:]}"
    grad = re.search(r"d loss / d mass ([-+0-9.e]+)", out)
    assert grad, f"the tour printed no gradient:\n{out}"
    assert float(grad.group(1)) < 0, f"d loss / d mass should be negative at the light guess:\n{out}"
    assert len(re.findall(r"^iter +\d+/\d+ +loss ", out, flags=re.M)) >= 3, f"no optimiser progress printed:\n{out}"
    fitted = re.search(r"fitted mass: ([0-9.]+) kg \(truth ([0-9.]+) kg\)", out)
    assert fitted, f"the tour printed no fitted mass:\n{out}"
    estimate, truth = float(fitted.group(1)), float(fitted.group(2))
    assert abs(estimate - truth) <= 5e-3 * truth, f"fitted mass {estimate} kg, truth {truth} kg:\n{out}"


# Appended to the README's material: its stress against central differences of its energy, and one short
# soft-body rollout with it (finite, above the ground).
MATERIAL_CHECK = """
import numpy as np
tgs.init(arch="cpu", precision="f64")
name = {name!r}
mat = tgs.get_material(name)
values = {{k: (v if v is not None else 1e3) * 1.7 for k, v in mat.params.items()}}
F = np.eye(3) + 0.15 * np.random.default_rng(0).standard_normal((3, 3))
P = tgs.registry.evaluate_stress(name, F, values)
fd = np.zeros((3, 3))
for a in range(3):
    for b in range(3):
        E = np.zeros((3, 3)); E[a, b] = 1e-6
        fd[a, b] = (tgs.registry.evaluate_energy(name, F + E, values)
                    - tgs.registry.evaluate_energy(name, F - E, values)) / 2e-6
print("stress error", np.abs(P - fd).max() / np.abs(P).max())
b = tgs.SceneBuilder(gravity=(0, -9.8, 0))
b.add_ground(ke=1e4, kd=1.0, kf=10.0, mu=0.5)
b.add_soft_mesh(tgs.meshes.tet_ball(0.5, 1, center=(0.0, 0.8, 0.0)), material=name, params=values, density=10.0,
                damping=0.5)
sim = tgs.Simulator(b.finalize(), dt=5e-4, steps=600)
sim.run()
q = sim.state.particle_q.to_numpy()
print("finite", bool(np.isfinite(q).all()), "lowest", q[..., 1].min())
"""


@pytest.mark.slow
def test_readme_material_works(tmp_path):
    code = snippet_code(README.read_text(), "material")
    names = re.findall(r"register_material\(\"(\w+)\"\)", code)
    assert len(names) == 1, f"the material snippet should register one material, found {names}"
    script = tmp_path / "material.py"          # a file: Taichi reads @ti.func sources with inspect
    script.write_text(code + MATERIAL_CHECK.format(name=names[0]))
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    out = proc.stdout
    assert proc.returncode == 0, f"the README material failed (exit {proc.returncode}):\n{out}\n{proc.stderr[-4000:]}"
    assert float(re.search(r"stress error ([-+0-9.e]+)", out).group(1)) < 1e-6, out
    finite = re.search(r"finite (True|False) lowest ([-+0-9.e]+)", out)
    assert finite.group(1) == "True" and float(finite.group(2)) > -0.02, out
