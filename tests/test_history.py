"""History.restore_best: an optimiser without a line search may end above its best iterate;
the fit goes back to the best recorded values of the phase's own params."""
import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs


def _param(name, value):
    fld = ti.field(float, shape=2)
    fld.from_numpy(np.array(value, dtype=np.float64))
    return tgs.Param(fld, name)


def test_restore_best_writes_the_lowest_loss_of_the_phase(f64):
    h = tgs.History()
    first, second = _param("a", [1.0, 1.0]), _param("b", [0.0, 0.0])
    for loss, v in ((5.0, 1.0), (0.5, 2.0), (4.0, 3.0)):       # phase 1: a; its own best is 0.5
        first.write(np.array([v, v]))
        h.record(loss, [first], 0.0)
    start = len(h.loss)
    for loss, v in ((3.0, 10.0), (1.0, 20.0), (2.0, 30.0)):    # phase 2: b, ends above its best
        second.write(np.array([v, -v]))
        h.record(loss, [second], 0.0)
    assert h.restore_best([second], start) == 4
    np.testing.assert_array_equal(second.value(), [20.0, -20.0])
    # over the whole history the best is phase 1's entry, where b was not recorded
    with pytest.raises(ValueError, match="'b' was not recorded at entry 1"):
        h.restore_best([second])


def test_restore_best_leaves_a_last_best_point(f64):
    h = tgs.History()
    p = _param("a", [1.0, 1.0])
    for loss, v in ((3.0, 1.0), (2.0, 2.0), (2.0, 3.0)):         # a tie with the last entry: keep the last
        p.write(np.array([v, v]))
        h.record(loss, [p], 0.0)
    assert h.restore_best([p]) is None
    np.testing.assert_array_equal(p.value(), [3.0, 3.0])
    assert tgs.History().restore_best([p]) is None
