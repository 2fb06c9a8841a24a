"""Genesis 1.4.5's MPM making the motion of one PAC-NeRF-protocol clip, run inside the Genesis venv (never imports
tigradsim): the engine half of benchmarks/make_pacnerf_footage.py, which writes the clip's spec as JSON, runs

    /opt/venvs/genesis/bin/python benchmarks/genesis_pacnerf_runner.py SPEC.json OUT.npz

and reads OUT.npz: `positions` (F, N, 3) float32 particle positions [m] at the footage frames (frame 0 = the
release, at rest), `surface_vertices` (V, 3) float32 / `surface_faces` (T, 3) int32 with `vertex_offsets` /
`face_offsets` (F + 1,) (frame k's surface is vertices[vo[k]:vo[k+1]], faces[fo[k]:fo[k+1]], indices local to
the frame), `particles`, `grid_nodes`, `seconds_simulate`, `seconds_surface`.  The venv (CPU torch, Genesis and
its Taichi fork `quadrants`; scikit-image and scipy come with Genesis):

    python3 -m venv /opt/venvs/genesis
    /opt/venvs/genesis/bin/pip install -r benchmarks/requirements-genesis.txt

The laws (SPEC "law"):
  elastic     Genesis MPM.Elastic(model="corotation"): fixed-corotated, E, nu.
  von_mises   Genesis MPM.ElastoPlastic(use_von_mises=True): fixed-corotated stress of the projected F, von Mises
              return mapping of the Hencky strain onto |dev eps| <= yield / (2 mu).
  sand        Genesis MPM.Sand: Hencky StVK, Drucker-Prager (Klar et al.) with its volume correction Jp.
  newtonian   Genesis MPM.Liquid(viscous=True), Genesis's own law: F is reset to J^(1/3) I every substep and the
              fixed-corotated stress of the one-substep trial F_tmp = (I + dt C) J^(1/3) I is taken, so that
              tau = 2 mu_G (F_tmp - U V^T) F_tmp^T + lam_G J (J - 1) I  =  2 (mu_G dt) dev(D) + (lam_G + 2 mu_G / 3)
              (J - 1) I + O(dt^2, (J - 1)^2): a Newtonian fluid of viscosity eta = mu_G dt and bulk modulus
              K = lam_G + 2 mu_G / 3.  The spec gives eta and K; the runner sets mu_G = eta / dt and
              lam_G = K - 2 eta / (3 dt) (dt: the substep).
  bingham     Genesis has no yield-stress fluid: `BinghamLiquid` below is one written as a Genesis user material
              (a subclass of MPM.Liquid: Genesis's grid, P2G / G2P transfers, boundary and time stepping are used
              unchanged, only the per-particle stress is ours).  The law is the regularised Bingham plastic of
              Papanastasiou (1987) (tigradsim's mpm_bingham states the same law; this is an independent
              implementation in quadrants): F reset to J^(1/3) I, D = dev sym(F_tmp) / (J^(1/3) dt) (the rate of
              the substep), gamma = sqrt(2 D:D), eta = eta_p + tau_y (1 - exp(-gamma / gamma_0)) / gamma,
              tau = K J (J - 1) I + 2 eta J D.

SPEC keys: law; E, nu (elastic, von_mises, sand), yield_stress (von_mises, bingham), friction_angle [deg] (sand),
viscosity, bulk_modulus (newtonian, bingham), plastic_viscosity, regularization_rate (bingham); rho [kg/m^3];
grid_density [1/m]; lower_bound, upper_bound [m] (Genesis's domain: its walls stand 3 cells inside); particle_size
[m] (the regular sampler's spacing; particle volume particle_size^3); box_size, box_center [m], box_quat (w, x, y,
z); gravity (3,); dt [s]; steps_per_frame; frames; floor_friction (None: the floor is the domain's own
frictionless wall; a number: a fixed rigid plane y = 0 coupled to the grid by Genesis's legacy coupler with that
coup_friction, Coulomb-like on the nodes it touches); surface_voxel [m] and surface_sigma [m] (the implicit surface:
`particle_surface`); threads; precision ("32", the footage's, or "64"); surfaces (default true; false: positions
only, for benchmarks/vs_genesis.py --footage).
"""
import json
import os
import sys
import time

# this folder holds benchmarks/coverage.py, which would shadow the `coverage` package numba (a Genesis
# dependency) imports: keep the script's own folder off the path
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import numpy as np  # noqa: E402


def particle_surface(x, spacing, voxel, sigma):
    """The surface of a cloud of MPM particles (N, 3) [m] sampled at `spacing`: the level 1/2 of their density
    (each particle deposits spacing^3 of volume, trilinearly, on a grid of `voxel` [m]; smoothed by a Gaussian of
    `sigma` [m]), by marching cubes.  Inside a lattice of spacing `spacing` the density is 1, so the level 1/2 lies
    half a spacing outside the outermost particles: on the faces of the body they sample.  Returns (V, 3) float32
    vertices [m] and (T, 3) int32 faces, oriented outward."""
    from scipy.ndimage import gaussian_filter
    from skimage.measure import marching_cubes

    pad = 3.0 * spacing + 4.0 * sigma
    lo = x.min(0) - pad
    shape = np.ceil((x.max(0) + pad - lo) / voxel).astype(int) + 1
    g = (x - lo) / voxel
    i0 = np.floor(g).astype(int)
    f = g - i0
    grid = np.zeros(shape)
    for dx in (0, 1):
        for dy in (0, 1):
            for dz in (0, 1):
                w = (np.where(dx, f[:, 0], 1 - f[:, 0]) * np.where(dy, f[:, 1], 1 - f[:, 1])
                     * np.where(dz, f[:, 2], 1 - f[:, 2]))
                np.add.at(grid, (i0[:, 0] + dx, i0[:, 1] + dy, i0[:, 2] + dz), w)
    grid *= (spacing / voxel) ** 3
    grid = gaussian_filter(grid, sigma / voxel, mode="constant")
    v, faces, _, _ = marching_cubes(grid, level=0.5, spacing=(voxel,) * 3)
    a, b, c = (v[faces[:, i]] for i in range(3))
    if np.einsum("ij,ij->i", a, np.cross(b, c)).sum() < 0:      # signed volume < 0: the normals point inward
        faces = faces[:, ::-1]
    return (v + lo).astype(np.float32), np.ascontiguousarray(faces, dtype=np.int32)


def bingham_class(gs, qd, base):
    """`BinghamLiquid`, a Genesis MPM user material (module docstring), built once Genesis is imported."""
    from typing import Any

    @qd.data_oriented
    class BinghamLiquid(base):
        yield_stress: float = 100.0
        plastic_viscosity: float = 1.0
        bulk_modulus: float = 1e5
        regularization_rate: float = 1.0
        substep_dt: float = 1e-4

        def model_post_init(self, context: Any) -> None:
            super().model_post_init(context)           # Liquid: F reset to J^(1/3) I (its update_F_S_Jp)
            self.update_stress = self._update_stress_bingham
            self.needs_svd = False

        @qd.func
        def _update_stress_bingham(self, U, S, V, F_tmp, F_new, J, Jp, actu, m_dir):
            eye = qd.Matrix.identity(gs.qd_float, 3)
            sym = 0.5 * (F_tmp + F_tmp.transpose())
            # F_tmp = (I + dt C) J_old^(1/3) I: its deviator is J_old^(1/3) dt dev(sym C)
            D = (sym - (sym.trace() / 3.0) * eye) / (qd.pow(J, 1.0 / 3.0) * self.substep_dt)
            gamma = qd.sqrt(2.0 * (D * D).sum() + 1e-30)
            x = gamma / self.regularization_rate
            ratio = 1.0 - 0.5 * x + x * x / 6.0
            if x >= 1e-4:
                ratio = (1.0 - qd.exp(-x)) / x
            eta = self.plastic_viscosity + self.yield_stress * ratio / self.regularization_rate
            return self.bulk_modulus * J * (J - 1.0) * eye + 2.0 * eta * J * D

    return BinghamLiquid


def material(gs, qd, spec):
    law, rho = spec["law"], spec["rho"]
    if law in ("elastic", "von_mises", "sand"):
        common = dict(E=spec["E"], nu=spec["nu"], rho=rho, sampler="regular")
        if law == "elastic":
            return gs.materials.MPM.Elastic(model="corotation", **common)
        if law == "von_mises":
            return gs.materials.MPM.ElastoPlastic(use_von_mises=True, von_mises_yield_stress=spec["yield_stress"],
                                                  **common)
        return gs.materials.MPM.Sand(friction_angle=spec["friction_angle"], **common)
    dt = spec["dt"]
    if law == "newtonian":
        eta, K = spec["viscosity"], spec["bulk_modulus"]
        lam = K - 2.0 * eta / (3.0 * dt)
        return gs.materials.MPM.Liquid(viscous=True, mu=eta / dt, lam=lam, rho=rho, sampler="regular")
    if law == "bingham":
        cls = bingham_class(gs, qd, gs.materials.MPM.Liquid)
        return cls(viscous=False, rho=rho, sampler="regular", yield_stress=spec["yield_stress"],
                   plastic_viscosity=spec["plastic_viscosity"], bulk_modulus=spec["bulk_modulus"],
                   regularization_rate=spec["regularization_rate"], substep_dt=dt)
    raise ValueError(f"law: expected elastic, von_mises, sand, newtonian or bingham, got {law!r}")


def main(spec_path, out_path):
    import torch
    import genesis as gs
    import quadrants as qd
    with open(spec_path) as fh:
        spec = json.load(fh)
    torch.set_num_threads(spec.get("threads", 2))
    gs.init(backend=gs.cpu, precision=spec.get("precision", "32"), logging_level="warning")
    scene = gs.Scene(
        sim_options=gs.options.SimOptions(dt=spec["dt"], substeps=1, gravity=tuple(spec["gravity"])),
        mpm_options=gs.options.MPMOptions(lower_bound=tuple(spec["lower_bound"]),
                                          upper_bound=tuple(spec["upper_bound"]),
                                          grid_density=spec["grid_density"], particle_size=spec["particle_size"]),
        show_viewer=False)
    if spec.get("floor_friction") is not None:
        # a fixed rigid plane y = 0 coupled to the MPM grid (Genesis's legacy coupler: a node near or inside it
        # loses its approaching normal velocity and, Coulomb-like, coup_friction times that from its tangential one)
        scene.add_entity(morph=gs.morphs.Plane(pos=(0.0, 0.0, 0.0), normal=(0.0, 1.0, 0.0), fixed=True),
                         material=gs.materials.Rigid(coup_friction=spec["floor_friction"]))
    entity = scene.add_entity(material=material(gs, qd, spec),
                              morph=gs.morphs.Box(pos=tuple(spec["box_center"]), size=tuple(spec["box_size"]),
                                                  quat=tuple(spec["box_quat"])))
    scene.build()
    t0 = time.perf_counter()
    frames = [entity.get_particles_pos().cpu().numpy().copy()]
    for k in range(1, int(spec["frames"])):
        for _ in range(int(spec["steps_per_frame"])):
            scene.step()
        frames.append(entity.get_particles_pos().cpu().numpy().copy())
        if not np.all(np.isfinite(frames[-1])):
            raise RuntimeError(f"Genesis's particles left the finite numbers at frame {k}: dt too large?")
    seconds_sim = time.perf_counter() - t0
    t0 = time.perf_counter()
    verts, faces, vo, fo = [], [], [0], [0]
    for x in frames if spec.get("surfaces", True) else []:
        v, f = particle_surface(x.astype(np.float64), spec["particle_size"], spec["surface_voxel"],
                                spec["surface_sigma"])
        verts.append(v)
        faces.append(f)
        vo.append(vo[-1] + len(v))
        fo.append(fo[-1] + len(f))
    kind = np.float32 if spec.get("precision", "32") == "32" else np.float64
    np.savez(out_path, positions=np.array(frames, dtype=kind),
             surface_vertices=np.concatenate(verts) if verts else np.zeros((0, 3), np.float32),
             surface_faces=np.concatenate(faces) if faces else np.zeros((0, 3), np.int32),
             vertex_offsets=np.array(vo), face_offsets=np.array(fo),
             particles=len(frames[0]), grid_nodes=np.array(scene.sim.mpm_solver._grid_res),
             seconds_simulate=seconds_sim, seconds_surface=time.perf_counter() - t0)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
