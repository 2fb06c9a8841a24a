"""Continuation over horizons with several candidates (tigradsim/fitting/continuation.py, issue 44 item 4):
the rule that keeps candidates from one horizon to the next, and `tgs.identify` fitting them breadth first.
"""
import math

import numpy as np
import pytest
import taichi as ti

import tigradsim as tgs
from tigradsim.fitting.continuation import KEEP_DROP_RATIO, keep_candidates


def test_clearly_worse_candidates_are_dropped_and_the_rest_kept_best_first():
    d = keep_candidates({4: 0.012, 0: 0.010, 7: 0.0199, 2: 0.0201, 5: 0.5}, keep=5)
    assert d.kept == [0, 4, 7]                     # within 2 x the best (0.010), best first
    assert d.worse == [2, 5] and d.capped == [] and d.failed == []
    assert d.best == 0.010 and d.drop_ratio == KEEP_DROP_RATIO == 2.0
    # a looser ratio keeps the 0.0201 one too
    assert keep_candidates({4: 0.012, 0: 0.010, 2: 0.0201}, keep=5, drop_ratio=3.0).kept == [0, 4, 2]


def test_keep_caps_the_competitive_candidates_and_says_so():
    d = keep_candidates({0: 1.0, 1: 1.1, 2: 1.2, 3: 5.0}, keep=2)
    assert d.kept == [0, 1] and d.capped == [2] and d.worse == [3]
    d.frames = 15
    text = d.sentence()
    assert "after the 15-frame horizon 2 of 4 candidates continue (starts 1, 2" in text
    assert "clearly worse (loss > 2 x the best): starts 4" in text
    assert "only because at most 2 continue: starts 3" in text and "raise keep" in text
    assert d.to_dict()["capped"] == [2] and d.to_dict()["objectives"]["3"] == 5.0


def test_ties_are_broken_by_start_and_failed_fits_dropped():
    d = keep_candidates({3: 0.5, 1: 0.5, 2: math.nan, 0: math.inf}, keep=1)
    assert d.kept == [1] and d.capped == [3] and d.failed == [0, 2]
    assert keep_candidates({0: math.nan}, keep=1).kept == []
    # a perfect best (loss 0) makes every positive loss clearly worse
    assert keep_candidates({0: 0.0, 1: 1e-12}, keep=3).worse == [1]


def test_a_candidate_at_the_point_of_a_better_one_does_not_take_a_place():
    points = {0: np.array([0.0, 1.0]), 1: np.array([0.005, 1.0]), 2: np.array([0.5, 1.0]), 3: np.array([0.0, 1.5])}
    d = keep_candidates({0: 1.0, 1: 1.01, 2: 1.2, 3: 1.3}, keep=2, points=points, spans=[1.0, 2.0])
    assert d.kept == [0, 2] and d.same == [1] and d.capped == [3]     # 0.005 <= 1 % of span 1.0
    assert "the same point as a better one: starts 2" in d.sentence()
    with pytest.raises(ValueError, match="points, spans"):
        keep_candidates({0: 1.0, 5: 2.0}, keep=2, points=points, spans=[1.0, 2.0])


def test_a_cap_through_a_tie_ranks_the_tied_candidates_on_the_next_horizon():
    calls = []

    def rescore(starts):
        calls.append(list(starts))
        return {2: 0.5, 0: 0.9, 5: 0.1, 4: math.inf}

    # losses 1.0, 1.02, 1.04 tie (within 5 %) with the last kept (1.02, keep 2); 1.3 and 2.5 do not
    d = keep_candidates({0: 1.0, 2: 1.02, 5: 1.04, 3: 1.3, 4: 2.5}, keep=2, rescore=rescore, rescored_frames=20)
    assert calls == [[0, 2, 5]]                       # the tied run, in the stage's order
    assert d.kept == [5, 2] and d.capped == [0, 3]    # ranked on the next horizon inside the tie, the rest after
    assert d.worse == [4] and d.rescored == {0: 0.9, 2: 0.5, 5: 0.1} and d.rescored_frames == 20
    d.frames = 10
    text = d.sentence()
    assert "starts 1, 3, 6 tied at the cap on these frames, so they were ranked on the 20-frame horizon's" in text
    assert "start 6 0.1" in text and d.to_dict()["rescored"] == {"0": 0.9, "2": 0.5, "5": 0.1}
    # a cap that cuts no tie is the stage's loss alone: rescore is not called
    calls.clear()
    d = keep_candidates({0: 1.0, 2: 1.2, 5: 1.3}, keep=1, rescore=rescore)
    assert calls == [] and d.kept == [0] and d.rescored == {} and d.rescored_frames is None
    # tie_rtol 0: only equal losses tie; a failed rescore (inf) ranks last within the tie
    assert keep_candidates({0: 1.0, 2: 1.02}, keep=1, rescore=rescore, tie_rtol=0.0).kept == [0]
    assert keep_candidates({0: 1.0, 4: 1.0}, keep=1, rescore=rescore).kept == [0]
    with pytest.raises(ValueError, match=r"rescore: expected a loss for every tied candidate \[0, 1\], missing \[1\]"):
        keep_candidates({0: 1.0, 1: 1.01}, keep=1, rescore=lambda starts: {0: 1.0})
    with pytest.raises(ValueError, match="rescore: expected None or a function"):
        keep_candidates({0: 1.0, 1: 1.01}, keep=1, rescore=3)
    with pytest.raises(ValueError, match="tie_rtol: expected a finite number >= 0"):
        keep_candidates({0: 1.0, 1: 1.01}, keep=1, tie_rtol=-1.0)


@pytest.mark.parametrize("kwargs, match", [({"keep": 0}, "keep: expected an integer >= 1"),
                                           ({"keep": True}, "keep: expected an integer >= 1"),
                                           ({"keep": 2, "drop_ratio": 1.0}, "drop_ratio: expected a finite number > 1"),
                                           ({"keep": 2, "drop_ratio": math.inf}, "drop_ratio"),
                                           ({"keep": 2, "drop_ratio": "2"}, "drop_ratio")])
def test_keep_candidates_checks_its_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        keep_candidates({0: 1.0}, **kwargs)


class TwoBasins:
    """A parameter a in [0, 4] with two basins, a ~ 3 and a ~ 1.  On the first 5 frames (what a short horizon
    sees) the a ~ 3 basin fits better, by a factor ~1.7 (within the drop ratio of 2); the later frames show
    the truth, a = 1, and there a ~ 3 is ~25 x worse.  Each frame's residuals: (a - 1)(a - 3) / 2 (both
    basins fit it), 0.05 (a - 3) early / 0.3 (a - 1) late (which basin is right), 0.12 (a constant
    misfit, as model mismatch gives)."""

    def __init__(self, early=0.05):
        self.a = ti.field(float, shape=(), needs_grad=True)
        self.frames = 10
        self.early = early            # how much the first 5 frames prefer the a ~ 3 basin
        self.param = tgs.Param(self.a, "a", lower=0.0, upper=4.0)

    def residuals(self):
        v = self.a[None]
        per = [np.array([0.5 * (v - 1.0) * (v - 3.0), self.early * (v - 3.0) if k < 5 else 0.3 * (v - 1.0), 0.12])
               for k in range(self.frames)]
        return np.concatenate(per)

    def set_horizon(self, k):
        self.frames = k

    def identify(self, **kw):
        self.a[None] = 3.4
        return tgs.identify([self.param], residuals=self.residuals, starts=8, local_starts=8, seed=0, lm_iters=25,
                            horizons=[5, 10], set_horizon=self.set_horizon, noise_floor=0.0, log_every=0, **kw)


def test_keeping_several_candidates_finds_the_basin_the_first_horizon_ranks_second(f64):
    problem = TwoBasins()
    kept = problem.identify(keep=2)
    assert kept.values["a"] == pytest.approx(1.0, abs=0.05)
    stage = kept.stages[0]
    assert stage.frames == 5 and len(stage.objectives) == 8
    # on 5 frames the a ~ 3 candidate led; both basins went on (the ratio is < 2), the truth won on 10
    # the 8 fits reached two points: one of each goes on, the 6 others are the same points again
    assert len(stage.kept) == 2 and not stage.worse and len(stage.same) == 6 and not stage.capped
    assert {round(m.values["a"]) for m in kept.minima} == {1, 3}
    assert kept.summary() == "one best minimum"
    # keeping only the leader of the 5-frame horizon ends in the other basin: keeping several is what found it
    one = problem.identify(keep=1)
    assert one.values["a"] == pytest.approx(3.0, abs=0.1) and one.stages[0].kept == [stage.kept[0]]
    assert one.stages[0].capped == [stage.kept[1]] and "raise keep" in one.summary()
    dropped = [r for r in one.runs if "dropped after the 5-frame horizon" in r.stop_reason]
    assert len(dropped) == 7 and all(r.minimum is None for r in dropped)
    assert one.to_dict()["stages"][0]["keep"] == 1


def test_candidates_that_tie_before_the_frames_that_tell_them_apart_are_ranked_on_those_frames(f64):
    """The ramp's case (benchmarks/RESULTS.md, issue 46): the frames before the impact fit every mass alike,
    so on the first horizon both basins tie (the a ~ 3 one ahead by ~0.7 %, within tie_rtol); with keep = 1
    the first horizon's loss alone would send the wrong basin on.  The cap through the tie ranks the tied
    candidates on the next horizon's frames instead, where a ~ 1 (the truth) is far better."""
    problem = TwoBasins(early=0.005)
    res = problem.identify(keep=1)
    assert res.values["a"] == pytest.approx(1.0, abs=0.05)
    stage = res.stages[0]
    assert stage.frames == 5 and len(stage.kept) == 1 and len(stage.capped) == 1
    leader_on_5 = min(stage.objectives, key=lambda k: stage.objectives[k] if k in stage.kept + stage.capped
                      else math.inf)
    assert leader_on_5 == stage.capped[0]             # the 5-frame leader (a ~ 3) is the one capped
    assert set(stage.rescored) == {stage.kept[0], stage.capped[0]} and stage.rescored_frames == 10
    assert stage.rescored[stage.kept[0]] < 0.1 * stage.rescored[stage.capped[0]]
    assert any("tied at the cap on these frames" in n for n in res.notes)
    # with no tolerance for ties (tie_rtol 0) the 5-frame loss alone decides, and the wrong basin goes on
    strict = problem.identify(keep=1, tie_rtol=0.0)
    assert strict.values["a"] == pytest.approx(3.0, abs=0.1) and strict.stages[0].rescored == {}


def test_a_candidate_that_fails_on_the_first_horizon_is_replaced_by_the_next_ranked_start(f64):
    """A start past the explicit limit fails at once (the ramp's LHS starts, RESULTS.md issue 46): without a
    replacement, local_starts = 2 would leave one candidate and nothing to compare on the later horizons."""
    problem = TwoBasins()
    residuals = problem.residuals
    calls = []

    def failing_once():          # calls 1..8 score the search's 8 starts; the 9th is the first local fit's
        calls.append(problem.a[None])
        if len(calls) == 9:
            raise tgs.SimulationError("the rollout blew up (test)")
        return residuals()

    problem.residuals = failing_once
    problem.a[None] = 3.4
    res = tgs.identify([problem.param], residuals=problem.residuals, starts=8, local_starts=2, keep=2, seed=0,
                       lm_iters=25, horizons=[5, 10], set_horizon=problem.set_horizon, noise_floor=0.0, log_every=0)
    ranked = sorted(range(8), key=lambda i: (res.search[i][1], i))
    assert res.search_fitted == ranked[:2]
    assert [r.start for r in res.runs] == ranked[:3]           # the third-ranked start took the failed one's place
    failed = res.runs[0]
    assert failed.stop_reason.startswith("failed: the rollout blew up") and failed.minimum is None
    assert f"replaced by start {ranked[2] + 1}, the next the search ranks" in failed.stop_reason
    stage = res.stages[0]
    assert stage.failed == [ranked[0]] and set(stage.objectives) == set(ranked[:3]) and len(stage.kept) == 2
    assert any(f"start {ranked[2] + 1}, the next the search ranks, was fitted in its place" in n for n in res.notes)
    assert res.values["a"] == pytest.approx(1.0, abs=0.05)


def test_identify_checks_keep_and_drop_ratio(f64):
    problem = TwoBasins()
    with pytest.raises(ValueError, match=r"keep: must be an integer >= 1.*got 0"):
        problem.identify(keep=0)
    with pytest.raises(ValueError, match=r"drop_ratio: must be a finite number > 1.*got 0.5"):
        problem.identify(drop_ratio=0.5)
    with pytest.raises(ValueError, match=r"tie_rtol: expected a finite number >= 0, got -0.1"):
        problem.identify(tie_rtol=-0.1)


def test_minima_within_tie_rtol_of_the_best_loss_are_equally_good(f64):
    """Two basins (a ~ 1 and a ~ 3) whose losses differ by ~2 %, on 2,000 residuals that are mostly a
    constant model error: the pixel likelihood-ratio test calls them distinct (2 dL / s^2 ~ 40), but a loss
    within tie_rtol (5 %) of the best is a tie, the result is ambiguous and the envelope spans both."""
    a = ti.field(float, shape=(), needs_grad=True)
    a[None] = 0.5
    p = tgs.Param(a, "a", lower=0.0, upper=4.0)

    def residuals():
        v = a[None]
        return np.concatenate([[2.0 * (v - 1.0) * (v - 3.0), 0.38 * (v - 1.0)], np.full(2000, 0.12)])

    res = tgs.identify([p], residuals=residuals, starts=8, local_starts=8, seed=0, lm_iters=25, noise_floor=0.0,
                       log_every=0)
    assert len(res.minima) == 2 and res.ambiguous and res.tied == [0, 1]
    second = res.minima[1]
    assert 0.005 < second.objective / res.minima[0].objective - 1.0 < 0.05
    assert 2.0 * (second.report.loss - res.best.loss) / res.best.s2 > 3.84     # distinct by the pixel test alone
    lo, hi = res.envelope("a")
    assert lo <= 1.0 and hi >= second.values["a"] > 2.5
    assert res.summary().startswith("ambiguous: 2 distinct minima fit equally well")
    strict = tgs.identify([p], residuals=residuals, starts=8, local_starts=8, seed=0, lm_iters=25, noise_floor=0.0,
                          tie_rtol=1e-3, log_every=0)
    assert not strict.ambiguous and strict.envelope("a") == (strict.best["a"].lower95, strict.best["a"].upper95)


def test_a_candidate_whose_gradient_fails_is_dropped_not_the_fit(f64):
    """A GradientError in one candidate's local fit (an adjoint that cannot be trusted, e.g. a rollout past
    the explicit limit) ends that candidate, as a rollout that blew up does; the others still compete.  Only
    when no candidate finishes does identify raise it (the CLI then reports the best rollout so far)."""
    problem = TwoBasins()
    residuals = problem.residuals

    def failing_near_3(every=False):
        def r():
            if problem.frames == 10 and (every or problem.a[None] > 2.0):
                raise tgs.GradientError("the adjoint grew by 1e9 (test)")
            return residuals()
        return r

    problem.residuals = failing_near_3()
    res = problem.identify(keep=2)
    assert res.values["a"] == pytest.approx(1.0, abs=0.05)
    failed = [r for r in res.runs if r.stop_reason.startswith("failed: the adjoint grew")]
    assert len(failed) == 1 and failed[0].minimum is None
    # nothing was dropped after 5 frames but the "same point" ones: no reserve, and the note says so
    assert f"start {failed[0].start + 1} failed on the 10-frame horizon; the reserve was empty, no candidate " \
           "took its place" in res.notes
    problem.residuals = failing_near_3(every=True)
    with pytest.raises(tgs.GradientError, match="the adjoint grew"):
        problem.identify(keep=2)


def test_when_every_kept_candidate_fails_the_dropped_ones_go_on(f64):
    """Newton's soft cube, camera variant, 256 steps (benchmarks/RESULTS.md, branch cam44): the one candidate
    kept after the 12-frame horizon hit an untrusted gradient on 24 frames, and the fit ended with none although
    the candidate dropped after 12 frames as worse had fitted fine.  Here keep = 1 keeps only the a ~ 3 basin
    after 5 frames; its gradient fails on 10: the candidates dropped after 5 frames go on in its place (the
    a ~ 1 basin, the truth), the failed one stays failed, and a note says so.  The "same" ones (at the failed
    one's point) do not go on."""
    problem = TwoBasins()
    residuals = problem.residuals

    def failing_near_3():
        if problem.frames == 10 and problem.a[None] > 2.0:
            raise tgs.GradientError("the adjoint grew by 1e9 (test)")
        return residuals()

    problem.residuals = failing_near_3
    res = problem.identify(keep=1)
    assert res.values["a"] == pytest.approx(1.0, abs=0.05) and res.minima[0].report is not None
    stage = res.stages[0]
    assert stage.kept != [] and stage.capped != []          # keep = 1 dropped the a ~ 1 candidate after 5 frames
    failed = [r for r in res.runs if r.stop_reason.startswith("failed: the adjoint grew")]
    assert [r.start for r in failed] == stage.kept and failed[0].minimum is None
    # one note per failure, the same format on every horizon (fitting/reserve.py): the best dropped one replaced it
    note = [n for n in res.notes if n.startswith(f"start {failed[0].start + 1} failed on the 10-frame horizon")]
    assert len(note) == 1 and note[0].endswith(
        f"start {stage.capped[0] + 1}, dropped after the 5-frame horizon as more than keep = 1 competitive "
        f"(loss {stage.objectives[stage.capped[0]]:.4g}), the best of those left, was fitted in its place")
    assert f"; replaced by start {stage.capped[0] + 1}, dropped after the 5-frame horizon" in failed[0].stop_reason
    revived = [r for r in res.runs if r.start == stage.capped[0]]
    assert revived[0].minimum == 0 and all(r.minimum is None for r in res.runs if r.start in stage.same)


def test_the_reserve_of_a_later_horizon_is_the_dropped_candidates_best_first():
    """fitting/reserve.py: after a horizon, the clearly worse and the capped candidates, by their loss on its
    frames; neither the "same point" ones nor the failed ones; each with the phrase the notes give."""
    from tigradsim.fitting.reserve import Reserve, dropped_candidates, replacement_note

    objectives = {0: 1.0, 1: 1.02, 2: 1.5, 3: 1.0, 4: 3.0, 5: math.nan, 6: 1.8}
    points = {k: np.array([float(k)]) for k in objectives}
    points[3] = points[0].copy()                                      # 3 reached 0's point
    decision = keep_candidates(objectives, keep=2, points=points, spans=np.array([10.0]))
    decision.frames = 20
    assert decision.kept == [0, 1] and decision.same == [3] and decision.worse == [4] and decision.failed == [5]
    assert decision.capped == [2, 6]
    reserve = Reserve(dropped_candidates(decision, {k: (f"run{k}", points[k]) for k in objectives}))
    assert [e[0] for e in reserve.entries] == ["run2", "run6", "run4"]
    assert reserve.entries[2][2] == "dropped after the 20-frame horizon as clearly worse (loss 3), the best of those left"
    assert reserve.entries[0][2].startswith("dropped after the 20-frame horizon as more than keep = 2 competitive")
    taken = [reserve.take()[0] for _ in range(3)]
    assert taken == ["run2", "run6", "run4"] and reserve.take() is None and len(reserve) == 0

    class R:
        start = 4
    assert replacement_note(R, None, None) == "start 5 failed; the reserve was empty, no candidate took its place"


class ThreeBasins(TwoBasins):
    """Three basins, a ~ 1 (the truth), 2 and 3: the first 5 frames rank them 3, 2, 1 (losses 0.036, 0.042,
    0.061: all within 2 x the best), the last 5 frames only a ~ 1 fits.  A gradient near a ~ 3 on 10 frames is
    rejected (the adjoint check), as a candidate that moved past the explicit limit is."""

    def residuals(self):
        v = self.a[None]
        if self.frames == 10 and v > 2.5:
            raise tgs.GradientError("the adjoint grew by 1e9 (test)")
        per = [np.array([(v - 1.0) * (v - 2.0) * (v - 3.0), 0.05 * (v - 3.0) if k < 5 else 0.3 * (v - 1.0), 0.12])
               for k in range(self.frames)]
        return np.concatenate(per)


def test_a_candidate_that_fails_on_a_later_horizon_is_replaced_while_others_go_on(f64):
    """One rule on every horizon (fitting/reserve.py): with keep = 2 the a ~ 3 and a ~ 2 candidates go on after
    5 frames and the a ~ 1 one is capped; on 10 frames the a ~ 3 one fails while the a ~ 2 one fits.  The
    failed one is replaced by the best candidate the 5-frame horizon dropped (a ~ 1), which wins on 10 frames;
    before, only a whole horizon failing brought the dropped ones back, and the fit ended at a ~ 2."""
    res = ThreeBasins().identify(keep=2)
    stage = res.stages[0]
    by_start = {r.start: r for r in res.runs}
    assert len(stage.kept) == 2 and len(stage.capped) == 1 and not stage.worse
    assert sorted(round(stage.objectives[i], 3) for i in stage.kept + stage.capped) == [0.036, 0.042, 0.061]
    failed, survivor = sorted(stage.kept, key=lambda i: stage.objectives[i])      # a ~ 3 led on 5 frames
    revived = stage.capped[0]
    assert by_start[failed].stop_reason.startswith("failed: the adjoint grew") and by_start[failed].minimum is None
    assert math.isfinite(by_start[survivor].objective) and by_start[survivor].minimum is not None
    assert res.values["a"] == pytest.approx(1.0, abs=0.05) and by_start[revived].minimum == 0
    assert {round(m.values["a"]) for m in res.minima} == {1, 2}
    # the capped candidate went on after all: the summary does not call it a basin that may have been missed
    assert stage.revived == [revived] and res.summary() == "one best minimum"
    assert any(n.endswith(f"in place of candidates that failed there: starts {revived + 1}") for n in res.notes)
    note = [n for n in res.notes if n.startswith(f"start {failed + 1} failed on the 10-frame horizon")]
    assert note == [f"start {failed + 1} failed on the 10-frame horizon; start {revived + 1}, dropped after the "
                    f"5-frame horizon as more than keep = 2 competitive (loss {stage.objectives[revived]:.4g}), the "
                    "best of those left, was fitted in its place"]
    assert f"; replaced by start {revived + 1}, dropped after the 5-frame horizon" in by_start[failed].stop_reason
    # the "same point" candidates (at a kept one's point) are no reserve: none of them was fitted again
    assert all(r.minimum is None and "dropped after the 5-frame horizon" in r.stop_reason
               for r in res.runs if r.start in stage.same)


def test_the_search_keeps_held_params_at_their_current_values(f64):
    """identify(search_held=[camera]): every search start keeps the held Param (a camera correction with a prior
    near zero and wide bounds) at its current value while the others are drawn over their bounds; the local
    fits still fit it.  Newton's soft cube, camera variant (branch cam44): drawn over +-3 degrees, the camera
    spoiled every random start (search loss 12 x the current point's).  A held Param not among params is
    refused by name."""
    a = ti.field(float, shape=(), needs_grad=True)
    c = ti.field(float, shape=(3,), needs_grad=True)
    a[None] = 3.0
    c.from_numpy(np.array([0.0, 0.0, 0.0]))
    pa = tgs.Param(a, "a", lower=0.1, upper=10.0, log_space=True)
    pc = tgs.Param(c, "camera", lower=np.full(3, -1.0), upper=np.full(3, 1.0))

    def residuals():
        cv = c.to_numpy()
        return np.concatenate([[a[None] - 1.0], 0.5 * (cv - np.array([0.02, -0.01, 0.03])), [0.05]])

    res = tgs.identify([pa, pc], residuals=residuals, starts=6, local_starts=2, seed=0, lm_iters=20, noise_floor=0.0,
                       log_every=0, search_held=[pc])
    assert all(values["camera[0]"] == values["camera[1]"] == values["camera[2]"] == 0.0 for values, _ in res.search)
    assert len({round(values["a"], 6) for values, _ in res.search}) == 6          # a is still drawn
    assert res.values["a"] == pytest.approx(1.0, abs=1e-3)
    assert np.allclose(c.to_numpy(), [0.02, -0.01, 0.03], atol=1e-3)               # the local fits fit it
    a[None] = 3.0
    c.from_numpy(np.zeros(3))
    free = tgs.identify([pa, pc], residuals=residuals, starts=6, local_starts=2, seed=0, lm_iters=20,
                        noise_floor=0.0, log_every=0)
    assert sum(values["camera[0]"] != 0.0 for values, _ in free.search) == 5       # without: drawn like the rest
    other = tgs.Param(ti.field(float, shape=()), "other", lower=0.0, upper=1.0)
    with pytest.raises(ValueError, match=r"search_held: expected Params among params, got \['other'\]"):
        tgs.identify([pa, pc], residuals=residuals, starts=2, log_every=0, search_held=[other])
