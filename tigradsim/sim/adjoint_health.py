"""The Simulator's adjoint-health rule: is the adjoint (d loss / d state) read during a backward pass finite, and
did it grow through the dynamics no faster than a stable scene's can?  The reads come from `AdjointTaps`; the
Simulator calls `AdjointHealth.judge` for each, later steps first, and turns a verdict into its GradientError.
"""
import math

# growth through the dynamics allowed beyond a bounded factor, per simulated second
ADJOINT_GROWTH_RATE = 20.0
ADJOINT_GROWTH_ALLOWANCE = 1e8


class AdjointHealth:
    """The looks of one backward pass: `trace`, a list of (step, a_pre, a_post) (None where not read), and the
    running growth sum the rule compares (`judge`)."""

    def __init__(self):
        self.trace = []
        self.last_post, self.log, self.min_level, self.min_step, self.min_log = None, 0.0, math.inf, None, 0.0

    def judge(self, step, a, bad, post, dt, steps, rate, allowance, error):
        """Raise error(what) if the adjoint at `step` is non-finite (or > 1e30), or grew too fast.

        Looks at steps every `adjoint_check_every` steps of the taped forward pass (and at the ends of
        segments, and step 0): a_pre(k), the adjoint that flowed back from later steps, and a_post(k),
        that plus what the observers at step k inject (`AdjointTaps` reads both).  a: the size read [-],
        bad: it was non-finite, post: a is a_post (else a_pre); dt [s], steps: the rollout's.  Growth is
        counted through the dynamics only: with L(k) = sum of ln(a_pre(k) / a_post(k+1)) from the last probe
        back to probe k, it raises when, for some later probe j,
            L(k) - L(j) > ln(allowance) + rate * (t_j - t_k).
        Defaults: ADJOINT_GROWTH_ALLOWANCE = 1e8 (a stable scene's adjoint changes by a bounded
        factor: the exchange between position and velocity sensitivities is about omega, up to ~1e4
        for stiff contact) and ADJOINT_GROWTH_RATE = 20 / s.  Measured: the gradient tests of
        test_core, test_rigid_grad, test_fem, test_cloth, test_control (43 tests with probes) stay below
        10^1.05 of growth; a spring lattice
        without shear springs collapsing on the ground (benchmarks/bench_particles.py's scene, a
        mechanism: physically chaotic) grows 2e9 in 0.5 s (43 / s) and passes; past an explicit limit
        the adjoint grows geometrically with every step (the README's ball at dt 1 ms: 1e11 in 0.07 s,
        2e14 in 0.3 s) and is caught.
        """
        t = step * dt
        if bad:
            later = self.trace[-1][0] if self.trace else None
            where = f"between steps {step} and {later}" if later is not None and later != step else \
                ("the end of the rollout" if step == steps else "the first probe")
            raise error(f"the adjoint (d loss / d state) became non-finite (or > 1e30) at step {step} (t = {t:.6g} s), "
                        f"{where}")
        if not post:
            self.trace.append((step, a, None))
            if self.last_post is None:
                return
            if a <= 0:                                   # the adjoint vanished: start afresh
                self.last_post, self.log, self.min_level = None, 0.0, math.inf
                return
            self.log += math.log(a / self.last_post)
            level = self.log + rate * t
            if level - self.min_level > math.log(allowance):
                j = self.min_step
                raise error(f"the adjoint (d loss / d state) grew by a factor {math.exp(self.log - self.min_log):.3g} "
                            f"through the dynamics going back from step {j} (t = {j * dt:.6g} s) to step {step} "
                            f"(t = {t:.6g} s): more than {allowance:g} x exp({rate:g}/s x {(j - step) * dt:.4g} s)")
            return
        if self.trace and self.trace[-1][0] == step and self.trace[-1][2] is None:
            self.trace[-1] = (step, self.trace[-1][1], a)
        else:
            self.trace.append((step, None, a))
        if a > 0:
            self.last_post = a
            level = self.log + rate * t
            if level < self.min_level:
                self.min_level, self.min_step, self.min_log = level, step, self.log
