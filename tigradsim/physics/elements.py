"""Elements grouped by material, with a table of parameter rows.

One mechanism for every kind of element that has a material (tets, cloth
triangles): elements are added in blocks (one mesh each) with a material name
and parameters; at finalize they are sorted by material so a force kernel runs
one loop per material (dispatched at compile time with `ti.static`, no runtime
if-chains), and each element reads its parameters from row `param_row[e]` of
the table `params[row, k]`:

    columns 0 .. n-1  the material's own parameters, in its `params` order
    column  DAMPING   (the last) the element's damping coefficient

A block added with `share_params=True` (the default) has ONE row for all its
elements, so an optimiser identifies one value per object (as the paper does
for mu and lam); with `share_params=False` every element has its own row.
Gradients with respect to the table accumulate over the elements using a row.
"""
from dataclasses import dataclass
from typing import List

import numpy as np
import taichi as ti

from ..core.errors import as_array, check_positive
from ..core.registry import get_material


@dataclass
class MaterialGroup:
    """Elements [start, end) of one material after sorting; `material` is the registered instance."""

    material: object
    start: int
    end: int
    param_count: int


class MaterialElements:
    """Collects element blocks of one kind ("tet", "shell") with their materials and parameters."""

    def __init__(self, kind: str):
        self.kind = kind
        self._blocks = []            # (material name, element count, rows (R, n) float64, damping (R,), shared)

    @property
    def count(self) -> int:
        return sum(b[1] for b in self._blocks)

    def add(self, material, count: int, params=None, damping=0.0, share_params=True) -> int:
        """Add `count` elements of `material` (a registered name).  Returns the first element index.

        params: name -> scalar (or, with share_params=False, (count,) arrays).
        damping: scalar (or (count,) with share_params=False), >= 0.
        """
        mat = get_material(material)
        if mat.kind != self.kind:
            raise ValueError(f"material {material!r} is of kind {mat.kind!r}; this element needs kind {self.kind!r} "
                             f"(registered {self.kind} materials: {_names(self.kind)})")
        values = dict(params or {})
        if "damping" in values:
            damping = values.pop("damping")
        table = np.atleast_2d(mat.param_vector(values))
        cls = type(mat)
        cls.check_params({k: table[..., i] for i, k in enumerate(mat.params)})
        rows = 1 if share_params else count
        if len(table) == 1:
            table = np.repeat(table, rows, axis=0)
        elif len(table) != rows:
            raise ValueError(f"params: arrays must have one value per element ({count}), got {len(table)}")
        damp = check_positive("damping", as_array("damping", damping, shape=(rows,)), allow_zero=True)
        start = self.count
        self._blocks.append((material, int(count), table, damp, share_params))
        return start

    def finalize(self, model, prefix: str):
        """Create `{prefix}_params` (rows, n_max + 1) and `{prefix}_param_row` (E,) on the model.

        Returns (order, groups): `order[k]` is the original index of sorted element k,
        `groups` the MaterialGroups in sorted order.
        """
        names = sorted({b[0] for b in self._blocks})
        width = max(len(get_material(n).params) for n in names) + 1
        row_tables, row_of_element, material_of_element = [], [], []
        next_row = 0
        for name, count, table, damp, shared in self._blocks:
            padded = np.zeros((len(table), width))
            padded[:, :table.shape[1]] = table
            padded[:, -1] = damp
            row_tables.append(padded)
            row_of_element.append(np.full(count, next_row) if shared else next_row + np.arange(count))
            material_of_element.append(np.full(count, names.index(name)))
            next_row += len(table)
        row_of_element = np.concatenate(row_of_element)
        material_of_element = np.concatenate(material_of_element)
        order = np.argsort(material_of_element, kind="stable")
        groups: List[MaterialGroup] = []
        sorted_mats = material_of_element[order]
        for m, name in enumerate(names):
            idx = np.nonzero(sorted_mats == m)[0]
            groups.append(MaterialGroup(get_material(name), int(idx[0]), int(idx[-1]) + 1, len(get_material(name).params)))
        model.add_field(f"{prefix}_params", float, (next_row, width), np.concatenate(row_tables))
        model.add_field(f"{prefix}_param_row", ti.i32, (len(order),), row_of_element[order], param=False)
        self.damping_column = width - 1
        return order, groups


def _names(kind):
    from ..core.registry import list_materials
    return list_materials(kind)


@ti.func
def material_params(table: ti.template(), row, n: ti.template()):
    """The first `n` entries of row `row` of a parameter table, as a ti.Vector."""
    return ti.Vector([table[row, k] for k in ti.static(range(n))])
