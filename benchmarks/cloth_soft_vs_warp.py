"""Cloth-FEM contact against NVIDIA Warp 1.9.1 (`warp.sim`): a cloth square dropped onto a soft block resting on
the ground, the same scene in both engines, trajectories compared (issue 46: the trajectory check of the cloth-FEM
pairing, `tigradsim/physics/cloth_soft_contact.py`).

    python3 benchmarks/cloth_soft_vs_warp.py [--duration 1.0] [--blocks long,square] [--precision f64]

Needs warp-lang 1.9.1 (the system Python's; `pip install -e .[bench]`).  Prints a table per block and a JSON last
line; about 4.5 (long) and 1.5 (square) minutes of Warp on the shared 2-core VM (its triangle contact tests every particle
against every triangle each step).

The scene (SCENE below): a soft block 0.2 x 0.1 x 0.2 m ("square", `meshes.tet_box(4, 2, 4)`, 75 vertices, 160
tets) or 0.2 x 0.1 x 0.4 m ("long", `tet_box(4, 2, 8)`), stable neo-Hookean, Warp-form damping, 200 kg/m^3,
standing on the ground; a 0.3 m cloth square (`meshes.cloth_grid(10, 10)`, 3 cm cells, membrane, no bending,
27 g) held flat and centred 1 cm above the contact thickness over the block's top, released from rest: it lands
on the top (about 0.05 s), bounces on the undamped contact and settles, its 5 cm overhang drapes down the sides.
On the square block the cloth's four corners overhang on two sides and fold as they drape; Warp's contact then
pushes the cloth off its own triangles (see below), tigradsim's cloth has no self-contact here: the long block,
on which the cloth overhangs on two opposite sides only, is the like-for-like check.  Both engines get the same
arrays (tigradsim's meshes: same vertex order, same lumped masses), f32 in Warp.

Conversions, one by one:
  * Contact law.  Warp's only particle-triangle contact is `eval_triangles_contact` (integrator_euler.py), on
    when `model.enable_tri_collisions`: EVERY particle against EVERY triangle it is not a vertex of, closest
    point by barycentric weights as tigradsim's (`triangle_closest_point_barycentric`: Ericson's regions), and
        f_p = 1e5 (r_p - d^2) n        where d^2 < r_p (d: the distance to the closest point; r_p the
                                        particle's radius; the SQUARE of d is compared with r_p, as written)
    with the reaction -w_k f_p on the triangle's vertices (as tigradsim's), two-sided, no damping, no friction,
    the stiffness 1e5 hard-coded.  So Warp's thickness is H = sqrt(r_p) and its force 1e5 (H - d)(H + d) =
    2e5 H (H - d) (1 - (H - d) / (2 H)): tigradsim's linear law ke (h - d) with
        h = H (tigradsim: the contact radii r_cloth + r_block = H / 2 + H / 2),   ke = 2e5 H [N/m],
        kd = kf = mu = 0
    agrees with it to a relative (H - d) / (2 H) at a penetration H - d (the script prints it at the cloth's
    middle's deepest point).
    Warp's targets are triangles: the cloth's triangles, and the block's boundary triangles added as
    triangles with no membrane (tri_ke = tri_kd = 0, tri_ka = 1e-9: Warp divides by it), so both directions
    of tigradsim's contact are there ("cloth on soft", "soft on cloth").  Warp also pushes a cloth vertex off
    the cloth's own triangles, a block vertex off the block's, within H (tigradsim: cloth self-contact is
    `add_cloth(self_contact=True)`, vertex-vertex, off here; a soft body has none): the script reports the
    closest such pair over the recorded frames (Warp's): on the long block none is within H; on the square
    block the folding corners are held at H by it.  tigradsim's triangles of the block are one-sided (a cloth
    vertex that got in is pushed out): the same as Warp's two-sided law while no cloth vertex is inside (the
    penetrations here are micrometres of the 1 cm thickness).
  * Contact radii vs the ground.  Warp's particle-ground contact uses the same r_p = H^2 (0.1 mm at H = 1 cm),
    tigradsim's the radius H / 2: Warp's ground plane is raised to y = H / 2 - H^2 (`set_ground_plane(offset=
    -(H/2 - H^2))`, Warp's plane is n.x + offset = 0) so a vertex touches the ground at y = H / 2 in both.
  * Ground law: fn = ke c + kd min(v_n, 0) while penetrating (tigradsim damping="uncapped"), friction
    min(kf |v_t|, mu |fn|) (tigradsim's default "capped" friction; `model.soft_contact_*`); the block rests.
  * FEM: Warp's add_tetrahedron(k_mu, k_lambda, k_damp) is tigradsim's "neo_hookean" (mu, lam) with damping =
    k_damp, damping_model = "warp" (interacting_sims.py, warp_ball_box).  Masses: density x volume / 4 per
    adjacent tet in both (Warp gets tigradsim's `node_mass`).
  * Cloth: Warp's add_triangle(tri_ke, tri_ka, tri_kd) is tigradsim's "membrane" mu, lam, damping (the same
    law; Warp also damps the area rate with tri_kd, tigradsim not: a small tri_kd); no bending in either (the
    bending laws differ by the current edge length, vs_warp.py), no drag or lift.  Masses: a uniform sheet's
    lumped masses, a third of density x area per adjacent triangle, in both.
  * Integrator: semi-implicit (symplectic) Euler in both, the same dt; Warp in f32, tigradsim in --precision.

What is compared (every SCENE["record_every"] = 20 steps): the cloth's centroid, the largest distance between a cloth vertex in
one engine and the same vertex in the other, the block's top (mean height of its top vertices), each against the
motion (the cloth centroid's largest displacement from its start); and at the end, where the physics must agree
even where the laws differ: the rest gap between the cloth's middle and the block's top (the thickness less
the load's penetration), the sag of the drape (the block's top less the cloth's lowest vertex), the block's top.
Measured: benchmarks/RESULTS.md, "Cloth on a soft block against Warp 1.9.1".
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

GRAVITY = 9.8
H = 0.01                    # [m] the contact thickness: Warp sqrt(r_p), tigradsim r_cloth + r_block
SCENE = dict(
    block_cells=(4, 2, 4), block_size=(0.2, 0.1, 0.2), block_mu=5e3, block_lam=1e4, block_k_damp=5.0,
    block_density=200.0,                                  # [Pa], [Pa], [Pa s], [kg/m^3]: a 0.8 kg block
    cloth_cells=10, cloth_cell=0.03, cloth_density=0.3,   # 0.3 m square, 27 g
    cloth_mu=50.0, cloth_lam=100.0, cloth_damping=0.01,   # membrane [N/m], [N/m], [N s/m]
    drop=0.01,                                            # [m] the cloth's start above the contact thickness
    ground=dict(ke=2e3, kd=0.2, kf=0.3, mu=0.5),  # within the explicit limit of the light cloth corners too
    dt=1e-4, record_every=20)
#: the block: "square" (0.2 x 0.2 m top, under the 0.3 m cloth: the cloth's corners overhang on two sides and fold
#: as it drapes, where Warp's contact pushes the cloth off its own triangles and tigradsim's has no self-contact)
#: or "long" (0.4 m deep: the cloth overhangs on two opposite sides only and drapes without folds)
BLOCKS = {"square": dict(block_cells=(4, 2, 4), block_size=(0.2, 0.1, 0.2)),
          "long": dict(block_cells=(4, 2, 8), block_size=(0.2, 0.1, 0.4))}
WARP_TRI_KE = 1e5           # the stiffness hard-coded in Warp's eval_triangles_contact


def scene_arrays(s=SCENE):
    """The rest meshes in world coordinates: block (V, 3), tets (T, 4), cloth (C, 3), triangles (F, 3) (local
    indices), and the block's bottom height (it touches the ground at the contact radius H / 2)."""
    from tigradsim import meshes
    sx, sy, sz = s["block_size"]
    bottom = H / 2
    v, t = meshes.tet_box(*s["block_cells"], size=s["block_size"], origin=(-sx / 2, bottom, -sz / 2))
    n, cell = s["cloth_cells"], s["cloth_cell"]
    half = n * cell / 2
    y = bottom + sy + H + s["drop"]
    cv, ct = meshes.cloth_grid(n, n, cell=cell, origin=(-half, y, -half), plane="xz")
    return np.asarray(v, np.float64), np.asarray(t, np.int64), np.asarray(cv, np.float64), np.asarray(ct, np.int64)


def run_tigradsim(steps, precision="f64", s=SCENE):
    """tigradsim's rollout: dict(q (R, P, 3) every record_every steps, block, cloth (global index arrays),
    block_faces (F, 3) global, masses (P,), seconds)."""
    import tigradsim as tgs
    tgs.init(arch="cpu", precision=precision)
    v, t, cv, ct = scene_arrays(s)
    g = s["ground"]
    b = tgs.SceneBuilder(gravity=(0.0, -GRAVITY, 0.0))
    b.add_ground(ke=g["ke"], kd=g["kd"], kf=g["kf"], mu=g["mu"], damping="uncapped")
    soft = b.add_soft_mesh((v, t), material="neo_hookean", params={"mu": s["block_mu"], "lam": s["block_lam"]},
                           density=s["block_density"], damping=s["block_k_damp"], damping_model="warp", radius=H / 2)
    cloth = b.add_cloth(cv, ct, params={"mu": s["cloth_mu"], "lam": s["cloth_lam"], "damping": s["cloth_damping"]},
                        density=s["cloth_density"], radius=H / 2)
    b.set_cloth_soft_contact(ke=2.0 * WARP_TRI_KE * H, kd=0.0, kf=0.0, mu=0.0)
    model = b.finalize(requires_grad=False)
    sim = tgs.Simulator(model, dt=s["dt"], steps=steps)
    start = time.perf_counter()
    sim.run()
    q = sim.state.particle_q.to_numpy().astype(np.float64)[::s["record_every"]]
    seconds = time.perf_counter() - start
    return dict(q=q, block=np.arange(soft.particle_start, soft.particle_start + soft.particle_count),
                cloth=np.arange(cloth.particle_start, cloth.particle_start + cloth.particle_count),
                block_faces=np.asarray(soft.faces), cloth_faces=np.asarray(cloth.faces),
                masses=model.particle_mass.to_numpy().astype(np.float64), seconds=seconds)


def run_warp(steps, ours, s=SCENE):
    """Warp's rollout of the same arrays (ours: `run_tigradsim`'s dict, for the particle order, the faces and
    the masses): dict(q (R, P, 3), seconds)."""
    from interacting_sims import _soft_ground, _warp, _warp_frames
    wp = _warp()
    v, t, cv, ct = scene_arrays(s)
    x0 = ours["q"][0]
    m = ours["masses"]
    g = s["ground"]
    b = wp.sim.ModelBuilder(up_vector=(0.0, 1.0, 0.0), gravity=-GRAVITY)
    for i in range(len(x0)):
        b.add_particle(wp.vec3(*x0[i]), wp.vec3(0.0, 0.0, 0.0), float(m[i]), radius=H * H)
    for tet in t + ours["block"][0]:
        volume = b.add_tetrahedron(*map(int, tet), k_mu=s["block_mu"], k_lambda=s["block_lam"],
                                   k_damp=s["block_k_damp"])
        assert volume > 0, "tet_box's tets should be positively oriented"
    for f in ours["cloth_faces"]:
        b.add_triangle(*map(int, f), tri_ke=s["cloth_mu"], tri_ka=s["cloth_lam"], tri_kd=s["cloth_damping"],
                       tri_drag=0.0, tri_lift=0.0)
    for f in ours["block_faces"]:           # contact targets only: no membrane (tri_ka > 0: Warp divides by it)
        b.add_triangle(*map(int, f), tri_ke=0.0, tri_ka=1e-9, tri_kd=0.0, tri_drag=0.0, tri_lift=0.0)
    b.set_ground_plane(offset=-(H / 2 - H * H), **g)
    model = b.finalize(device="cpu")
    _soft_ground(model, g)
    model.enable_tri_collisions = True
    integrator = wp.sim.SemiImplicitIntegrator()
    start = time.perf_counter()
    frames = _warp_frames(wp, model, integrator, s["dt"], s["record_every"], steps // s["record_every"] + 1,
                          lambda st: st.particle_q.numpy().astype(np.float64))
    return dict(q=np.array(frames), seconds=time.perf_counter() - start)


def self_clearance(q, vertices, faces):
    """Per frame of q (R, P, 3), the smallest distance from a vertex of `vertices` to a triangle of `faces` (global
    indices) it is not a vertex of: Warp's contact acts there below H, tigradsim's does not.  (R,) [m]."""
    from tigradsim.physics.shapes import _point_triangle_distance    # Ericson's regions, numpy
    incident = (faces[None, :, :] == vertices[:, None, None]).any(-1)
    return np.array([np.where(incident, np.inf, _point_triangle_distance(
        x[vertices], x[faces[:, 0]], x[faces[:, 1]], x[faces[:, 2]])).min() for x in q])


def summarise(ours, warp, s=SCENE, until=None):
    """The comparison's figures (module docstring); until: a frame index, the differences before it apart too
    (Warp's self-contact from there on: `self_clearance`)."""
    qa, qb = ours["q"], warp["q"]
    n = min(len(qa), len(qb))
    qa, qb = qa[:n], qb[:n]
    cl, bl = ours["cloth"], ours["block"]
    m = ours["masses"]
    w = m[cl] / m[cl].sum()
    cen_a = np.einsum("rpk,p->rk", qa[:, cl], w)
    cen_b = np.einsum("rpk,p->rk", qb[:, cl], w)
    motion = float(np.linalg.norm(cen_a - cen_a[0], axis=1).max())
    top_ids = bl[qa[0, bl, 1] > qa[0, bl, 1].max() - 1e-9]
    top_a, top_b = qa[:, top_ids, 1].mean(1), qb[:, top_ids, 1].mean(1)
    vertex = np.linalg.norm(qa[:, cl] - qb[:, cl], axis=2).max(1)
    centre = cl[np.argmin(np.linalg.norm(qa[0, cl][:, [0, 2]], axis=1))]

    def gap(q):                              # the cloth's middle above the block's top (its nearest top vertex)
        near = top_ids[np.argmin(np.linalg.norm(q[-1, top_ids][:, [0, 2]] - q[-1, centre, [0, 2]], axis=1))]
        return q[:, centre, 1] - q[:, near, 1]

    gap_a, gap_b = gap(qa), gap(qb)
    landed = np.nonzero(gap_a < 1.05 * H)[0]         # the middle within 5 % of the thickness of the top
    depth = float(H - gap_a.min())               # the middle's largest penetration into the thickness
    times = np.arange(n) * s["dt"] * s["record_every"]
    rows = []
    for k in sorted(set(np.linspace(0, n - 1, 7).round().astype(int))):
        rows.append(dict(t=round(float(times[k]), 4), centroid_y_tigradsim=float(cen_a[k, 1]),
                         centroid_y_warp=float(cen_b[k, 1]),
                         centroid_diff_mm=float(np.linalg.norm(cen_a[k] - cen_b[k]) * 1e3),
                         max_vertex_diff_mm=float(vertex[k] * 1e3),
                         top_tigradsim=float(top_a[k]), top_warp=float(top_b[k]),
                         gap_mm_tigradsim=float(gap_a[k] * 1e3), gap_mm_warp=float(gap_b[k] * 1e3)))
    end = {
        "rest_gap_mm": {"tigradsim": float(gap_a[-1] * 1e3), "warp": float(gap_b[-1] * 1e3)},
        "drape_sag_mm": {"tigradsim": float((top_a[-1] - qa[-1, cl, 1].min()) * 1e3),
                         "warp": float((top_b[-1] - qb[-1, cl, 1].min()) * 1e3)},
        "block_top_m": {"tigradsim": float(top_a[-1]), "warp": float(top_b[-1])},
        "block_top_sink_mm": {"tigradsim": float((top_a[0] - top_a[-1]) * 1e3),
                              "warp": float((top_b[0] - top_b[-1]) * 1e3)},
    }
    drift = {"tigradsim": [round(float(x) * 1e3, 4) for x in cen_a[-1, [0, 2]] - cen_a[0, [0, 2]]],
             "warp": [round(float(x) * 1e3, 4) for x in cen_b[-1, [0, 2]] - cen_b[0, [0, 2]]]}
    k_worst = int(np.argmax(vertex))
    v_worst = cl[int(np.argmax(np.linalg.norm(qa[k_worst, cl] - qb[k_worst, cl], axis=1)))]
    worst = dict(t=float(times[k_worst]), rest_x=float(qa[0, v_worst, 0]), rest_z=float(qa[0, v_worst, 2]))
    centroid_diff = np.linalg.norm(cen_a - cen_b, axis=1)
    before = None if until is None else dict(
        centroid_diff_max_mm=float(centroid_diff[:until].max() * 1e3),
        centroid_diff_max_over_motion=float(centroid_diff[:until].max() / motion),
        max_vertex_diff_max_mm=float(vertex[:until].max() * 1e3), max_vertex_diff_max_over_motion=float(
            vertex[:until].max() / motion))
    return dict(
        before_self_contact=before, worst_vertex=worst, drift_mm=drift, frames=n, seconds_simulated=float(times[-1]), landed_at_s=float(times[landed[0]]) if len(landed) else None,
        motion_mm=motion * 1e3,
        centroid_diff_max_mm=float(np.linalg.norm(cen_a - cen_b, axis=1).max() * 1e3),
        centroid_diff_max_over_motion=float(np.linalg.norm(cen_a - cen_b, axis=1).max() / motion),
        max_vertex_diff_max_mm=float(vertex.max() * 1e3),
        max_vertex_diff_max_over_motion=float(vertex.max() / motion),
        block_top_diff_max_mm=float(np.abs(top_a - top_b).max() * 1e3),
        law_difference_at_deepest=depth / (2 * H),
        end=end, rows=rows)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=1.0, help="seconds simulated (default 1)")
    ap.add_argument("--blocks", default="long,square", help="which blocks (BLOCKS), comma-separated")
    ap.add_argument("--precision", default="f64", choices=("f32", "f64"), help="tigradsim's (Warp runs f32)")
    ap.add_argument("--no-self-check", action="store_true", help="skip the self-clearance check (numpy, slow-ish)")
    args = ap.parse_args(argv)
    results = {}
    for block in args.blocks.split(","):
        if block not in BLOCKS:
            ap.error(f"--blocks: {block!r} is not one of {sorted(BLOCKS)}")
        results[block] = compare(dict(SCENE, **BLOCKS[block]), block, args)
    print(json.dumps({k: {x: y for x, y in v.items() if x != "rows"} for k, v in results.items()}))
    return results


def compare(s, block, args):
    """Both rollouts of scene `s`, the figures printed (one table) and returned."""
    steps = int(round(args.duration / s["dt"] / s["record_every"])) * s["record_every"]
    ours = run_tigradsim(steps, args.precision, s)
    warp = run_warp(steps, ours, s)
    clear, below = None, []
    if not args.no_self_check:
        clear = {k: self_clearance(warp["q"], ours[k], ours[f"{k}_faces"]) for k in ("cloth", "block")}
        below = np.nonzero((clear["cloth"] < H) | (clear["block"] < H))[0]
    out = summarise(ours, warp, s, until=below[0] if len(below) else None)
    if clear is not None:
        out["warp_self_clearance_mm"] = {k: float(v.min() * 1e3) for k, v in clear.items()}
        out["warp_self_contact_from_s"] = float(below[0] * s["dt"] * s["record_every"]) if len(below) else None
    out["seconds"] = {"tigradsim": ours["seconds"], "warp": warp["seconds"]}
    out["constants"] = {"block": block, "block_size": s["block_size"], "H_m": H, "ke_tigradsim": 2 * WARP_TRI_KE * H,
                        "warp_particle_radius": H * H, "warp_ground_plane_y": H / 2 - H * H, "dt": s["dt"],
                        "precision_tigradsim": args.precision}
    print(f"\ncloth on the {block} soft block {s['block_size']}, tigradsim ({args.precision}) vs Warp (f32), "
          f"dt {s['dt']:g} s, H = {H * 1e3:g} mm")
    print(f"{'t [s]':>7} {'cen y tgs':>10} {'cen y warp':>10} {'cen diff mm':>11} {'max vtx mm':>10} "
          f"{'top tgs':>9} {'top warp':>9} {'gap tgs mm':>10} {'gap warp mm':>11}")
    for r in out["rows"]:
        print(f"{r['t']:7.3f} {r['centroid_y_tigradsim']:10.5f} {r['centroid_y_warp']:10.5f} "
              f"{r['centroid_diff_mm']:11.3f} {r['max_vertex_diff_mm']:10.3f} {r['top_tigradsim']:9.5f} "
              f"{r['top_warp']:9.5f} {r['gap_mm_tigradsim']:10.3f} {r['gap_mm_warp']:11.3f}")
    worst = out["worst_vertex"]
    print(f"motion (centroid's largest displacement) {out['motion_mm']:.2f} mm; centroid difference at most "
          f"{out['centroid_diff_max_mm']:.3f} mm ({100 * out['centroid_diff_max_over_motion']:.2f} % of it); "
          f"largest vertex difference {out['max_vertex_diff_max_mm']:.3f} mm "
          f"({100 * out['max_vertex_diff_max_over_motion']:.2f} %; at t = {worst['t']:.3f} s, the vertex at rest "
          f"x = {worst['rest_x']:.3f}, z = {worst['rest_z']:.3f} m); block top at most "
          f"{out['block_top_diff_max_mm']:.4f} mm apart")
    print(f"laws: Warp's force is tigradsim's x (1 - depth / 2H): at the middle's deepest {out['law_difference_at_deepest']:.3%}")
    since = out.get("warp_self_contact_from_s")
    if "warp_self_clearance_mm" in out:
        print(f"Warp's self-contact (below H = {H * 1e3:g} mm): closest cloth vertex to a cloth triangle "
              f"{out['warp_self_clearance_mm']['cloth']:.4f} mm"
              + (f" (below H from t = {since:.3f} s)" if since is not None else "")
              + f", block vertex to a block triangle {out['warp_self_clearance_mm']['block']:.4f} mm")
    if since is not None:
        b = out["before_self_contact"]
        print(f"before Warp's self-contact (t < {since:.3f} s): centroid difference at most {b['centroid_diff_max_mm']:.3f} "
              f"mm ({100 * b['centroid_diff_max_over_motion']:.2f} % of the motion), largest vertex difference "
              f"{b['max_vertex_diff_max_mm']:.3f} mm ({100 * b['max_vertex_diff_max_over_motion']:.2f} %)")
    print(f"the cloth's horizontal drift (centroid x, z at the end) [mm]: tigradsim {out['drift_mm']['tigradsim']}, "
          f"Warp {out['drift_mm']['warp']}")
    print("end:", json.dumps(out["end"]))
    return out


if __name__ == "__main__":
    main()
