"""Taps on the state adjoint: where the backward pass of a rollout looks at d loss / d state.

The Simulator's adjoint check (`Simulator._judge_adjoint`) needs max |adjoint| at a step every
`adjoint_check_every` steps.  Taichi's reverse of the step that wrote a slot zeroes that slot's adjoint
as it passes it on, so once a fused run of steps has been reversed only its first slot still holds its
adjoint; reading the others from outside meant ending the fused launch at every look (two more
launches each, and one more forward and reverse launch of the steps).

A tap reads it from inside instead: at a watched slot the step kernels subtract a zero (`tap[m, i]`,
a field with a gradient) from the state they have just written, and the reverse of that subtraction
adds -adjoint into `tap.grad[m, i]` at the moment the slot's adjoint is final.  `x - 0.0 == x` bit
for bit (signed zeros and NaN included), so the rollout is unchanged; at the end of a segment's
backward pass one launch (`measure`) reduces every tap to its max |.| and zeroes them.

Two taps per watched slot: `post`, subtracted right after the step that writes the slot (it holds
what the later steps and the observers at that slot sent back), and `pre`, subtracted at the start of
a run of steps that begins at the slot (it holds only what the later steps sent back: the observers
at that slot have not yet added the loss they inject).  Where no observer fires at a slot the two are
the same and only `post` is used.
"""

import taichi as ti
from taichi.lang.field import ScalarField

from ..core.model import new_field
from ..core.runtime import serial_loop


@ti.func
def as_tensor(fld: ti.template(), value):
    """A state value as a vector or matrix: a scalar state kind's value (e.g. `mpm_plastic`) as a vec1, so
    that the finite checks' `.all()` and `.max()` work for every kind."""
    if ti.static(isinstance(fld, ScalarField)):
        return ti.Vector([value])
    else:
        return value


@ti.data_oriented
class AdjointTaps:
    """The taps of one Simulator's state store: slots 0..segment_length, a tap every `every` slots
    and one at the segment's last slot.

    Args:
        store: the Simulator's StateStore (working buffer: `segment_length` + 1 slots); its
            non-accumulator state fields (shape (slots, count)) are watched.
        segment_length: steps per segment (the whole rollout without checkpointing).
        every: slots between taps (Simulator's `adjoint_check_every`).
    Attributes:
        pairs: (state field, pre tap, post tap) per stored field; taps have shape (tap_count, count).
    """

    def __init__(self, store, segment_length: int, every: int):
        self.every = int(every)
        self.tap_count = int(segment_length) // self.every + 2   # the last: an end between two multiples
        kinds = [k for k in store.kinds if not k.accumulator]
        self.pairs = [(getattr(store, k.name),
                       new_field(k.dtype, (self.tap_count, k.count), needs_grad=True),
                       new_field(k.dtype, (self.tap_count, k.count), needs_grad=True)) for k in kinds]
        self._max = ti.field(float, shape=(self.tap_count + 1, 2))
        self._bad = ti.field(ti.i32, shape=(self.tap_count + 1, 2))
        self._size = ti.field(float, shape=(self.tap_count + 1, 2))
        self.dirty = False              # a taped forward ran and its backward has not read the taps yet

    def index(self, slot: int) -> int:
        """The tap of a watched slot: slot / every, or the last one for a segment end between."""
        return slot // self.every if slot % self.every == 0 else self.tap_count - 1

    @ti.func
    def tap_index(self, slot):
        """`index` inside a kernel."""
        m = self.tap_count - 1
        if slot % self.every == 0:
            m = slot // self.every
        return m

    @ti.func
    def watched(self, slot, tap_end):
        """1 where the step kernels tap `slot` (every `every` slots and the segment's end `tap_end`),
        else 0; tap_end < 0: no taps (an untaped run)."""
        return ti.cast(tap_end >= 0 and (slot % self.every == 0 or slot == tap_end), ti.i32)

    def is_watched(self, slot: int, tap_end: int) -> bool:
        """`watched` in Python."""
        return tap_end >= 0 and (slot % self.every == 0 or slot == tap_end)

    @ti.func
    def subtract(self, fld: ti.template(), tap: ti.template(), s, m, on):
        """fld[s, :] -= tap[m, :] where on = 1 (inside a fused step loop: a loop of 0 entries where
        on = 0 costs one comparison per step)."""
        for i in range(fld.shape[1] * on):
            fld[s, i] -= tap[m, i]      # minus a zero: unchanged, and the reverse records the adjoint

    @ti.kernel
    def record_pre(self, s: ti.i32, m: ti.i32):
        """Add the adjoint at slot s into pre tap m's gradient, read from outside: where the steps run one
        launch each or reverse one by one, the backward pass calls this between launches (a kernel of
        its own subtracting a tap would read and write the state, which `ti.ad.Tape(validation=True)`
        rejects)."""
        for pair in ti.static(self.pairs):
            for i in range(pair[0].shape[1]):
                pair[1].grad[m, i] += pair[0].grad[s, i]

    @ti.kernel
    def record_post(self, s: ti.i32, m: ti.i32):
        """`record_pre` for post tap m."""
        for pair in ti.static(self.pairs):
            for i in range(pair[0].shape[1]):
                pair[2].grad[m, i] += pair[0].grad[s, i]

    @ti.func
    def _record(self, j, c, value):
        g = ti.abs(value)
        if not (g <= 1e30).all():        # NaN compares false
            self._bad[j, c] = 1
        else:
            ti.atomic_max(self._max[j, c], g.max())

    @ti.kernel
    def measure(self, slot: ti.i32, taps: ti.i32) -> ti.f64:
        """max |adjoint| of the state at `slot` (-1: non-finite or > 1e30), read directly; with
        taps != 0 also every tap's max |.| into `sizes()` (row m: [pre, post]), zeroing the taps."""
        for j, c in self._max:
            self._max[j, c] = 0.0
            self._bad[j, c] = 0
        for pair in ti.static(self.pairs):
            ti.loop_config(serialize=ti.static(serial_loop(pair[0].shape[1] * self.tap_count)))
            for j, i in ti.ndrange(self.tap_count * taps, pair[0].shape[1]):
                self._record(j, 0, as_tensor(pair[0], pair[1].grad[j, i]))
                self._record(j, 1, as_tensor(pair[0], pair[2].grad[j, i]))
                pair[1].grad[j, i] = ti.zero(pair[1].grad[j, i])
                pair[2].grad[j, i] = ti.zero(pair[2].grad[j, i])
            ti.loop_config(serialize=ti.static(serial_loop(pair[0].shape[1])))
            for i in range(pair[0].shape[1]):
                self._record(self.tap_count, 0, as_tensor(pair[0], pair[0].grad[slot, i]))
        for j, c in self._size:
            self._size[j, c] = ti.select(self._bad[j, c] > 0, -1.0, self._max[j, c])
        return self._size[self.tap_count, 0]

    def sizes(self):
        """(tap_count, 2) numpy: max |adjoint| at each tap's slot, [pre, post], -1 where non-finite,
        as the last `measure(..., taps=1)` found them."""
        return self._size.to_numpy()[:self.tap_count]

    @ti.kernel
    def clear(self):
        """Zero every tap's gradient (after a backward pass that stopped before reading them)."""
        for pair in ti.static(self.pairs):
            for j, i in ti.ndrange(self.tap_count, pair[0].shape[1]):
                pair[1].grad[j, i] = ti.zero(pair[1].grad[j, i])
                pair[2].grad[j, i] = ti.zero(pair[2].grad[j, i])

