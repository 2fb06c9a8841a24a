"""README.md's "A short tour" runs as pasted and does what it says (issue 19, item 3).

The tour is the python code between the markers `<!-- tour:begin -->` and `<!-- tour:end -->` in README.md
(every ```python block in between, in order: that is what a reader copies).  It runs in a fresh interpreter,
in an empty folder, and must exit 0, print a negative d loss / d mass at the light initial guess (the target
box is heavier, so adding mass lowers the loss), print the optimiser's progress, and fit the mass to within
0.5 % of the truth it states.
"""
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BEGIN, END = "<!-- tour:begin -->", "<!-- tour:end -->"


def tour_code(text):
    """The python source of the tour: the ```python blocks between the markers, joined."""
    assert text.count(BEGIN) == 1 and text.count(END) == 1, \
        f"README.md must contain {BEGIN!r} and {END!r} exactly once each, around the tour's code"
    region = text[text.index(BEGIN) + len(BEGIN):text.index(END)]
    blocks = re.findall(r"^```python[ \t]*\n(.*?)^```[ \t]*$", region, flags=re.S | re.M)
    assert blocks, "no ```python block between the tour markers"
    return "\n".join(blocks)


def test_tour_code_is_found():
    """The extraction finds exactly the marked blocks, not the README's other python snippets."""
    text = "```python\nother = 1\n```\n" + BEGIN + "\ntext\n```python\na = 1\n```\nmore\n```python\nb = a\n```\n" \
        + END + "\n```python\nlater = 2\n```\n"
    assert tour_code(text) == "a = 1\n\nb = a\n"
    with pytest.raises(AssertionError):
        tour_code("no markers")


def test_readme_tour_runs_as_pasted(tmp_path):
    code = tour_code(README.read_text())
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
