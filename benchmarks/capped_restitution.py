"""Restitution of one penalty contact point under tigradsim's "capped" damping law against contact damping kd
(issue 46: does a fitted bodies.kd at the top of its prior range, 100 N s/m, mean the range is too narrow?).

The normal force of `tigradsim.physics.contact` with damping = "capped" is fn = ke |c| + min(kd max(-v_n, 0),
ke |c|): the damping acts only while the points approach and never exceeds the elastic force.  So during the
compression the force is at most 2 ke |c|, and during the rebound ke |c|: a linear spring then gives back at
least half the energy, e >= 1/sqrt(2) ~ 0.71, whatever kd.  This script integrates one point (mass m per
contact point, semi-implicit Euler at the ramp scene's dt = 1/(30 x 32) s, 0.5 m/s approach) and prints e over
kd, for the box-box contact the ramp fits end at, and the same for Warp's uncapped law (fd = kd max(-v_n, 0)
while c < 0) at its own constants and step.  numpy only; a few seconds.

    python benchmarks/capped_restitution.py
"""
import numpy as np


def restitution(ke, kd, m, dt, capped=True, v0=0.5):
    """e = v_out / v_in of a point of mass m [kg] hitting a penalty wall (ke [N/m], kd [N s/m]) at v0 [m/s]."""
    x, v = 0.0, -v0
    for _ in range(1_000_000):
        c = min(x, 0.0)
        fe = -ke * c
        fd = kd * max(-v, 0.0)
        f = (fe + (min(fd, fe) if capped else fd)) if c < 0 else 0.0
        v += dt * f / m
        x += dt * v
        if x > 0 and v > 0:
            return v / v0
    return float("nan")


def main():
    dt = 1.0 / (30 * 32)
    kds = (1, 10, 30, 100, 200, 300, 1000, 1e5)
    print(f"tigradsim capped law, dt {dt:.3g} s; m per corner: the box pair's reduced mass (1 kg and 1.2 kg: 0.545 kg) "
          "over 4 corners")
    m = 1.2 / 2.2 / 4
    for ke in (3.4e3, 7e3, 6.7e4):
        crit = 2 * np.sqrt(ke * m)
        row = ", ".join(f"kd {kd:g}: {restitution(ke, kd, m, dt):.3f}" for kd in kds)
        print(f"  ke {ke:g} N/m (critical damping 2 sqrt(ke m) = {crit:.0f} N s/m, explicit limit 2 m / dt = "
              f"{2 * m / dt:.0f} N s/m): e at {row}")
    dt_warp = 1.0 / (30 * 256)
    for points in (8, 4):
        m = 1.2 / 2.2 / points
        print(f"Warp's uncapped law, its pair constants ke 2e4, kd 30, dt {dt_warp:.3g} s, {points} points: e "
              f"{restitution(2e4, 30.0, m, dt_warp, capped=False):.3f}")


if __name__ == "__main__":
    main()
