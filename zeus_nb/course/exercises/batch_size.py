"""Notebook 04's exercises: early stopping and one round of Thompson sampling."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from zeus_nb.course.exercises.base import Case, Mistake, draw, rng, separating


def should_stop_ref(cost: float, best: float | None, beta: float) -> bool:
    if best is None or math.isinf(beta):
        return False
    return cost > beta * best


def should_stop_cases() -> list[Case]:
    """Every case asks once where the answer is "stop" and once where it is "go on"."""
    r = rng("should_stop_early")
    best = round(r.uniform(50, 500), 1)
    beta = round(r.uniform(1.5, 3), 2)
    past = "a run stops once its cost is more than beta x the best cost so far"
    return [
        Case(
            "a cost past beta x best",
            (round(best * beta * 1.3, 1), best, beta),
            past,
            also=((round(best * (1 + beta) / 2, 1), best, beta),),  # between best and beta x best
        ),
        Case(
            "a cost exactly beta x best",
            (200.0, 100.0, 2.0),
            "a cost of exactly beta x best goes on",
            also=((200.5, 100.0, 2.0),),
        ),
        Case(
            "beta = inf",
            (1e9, 100.0, math.inf),
            "beta = inf never stops a run",
            also=((1e9, 100.0, 3.0),),
        ),
        Case(
            "no best cost yet",
            (500.0, None, 2.0),
            "with no successful run yet (best_cost is None) no run stops",
            also=((500.0, 200.0, 2.0),),
        ),
    ]


def should_stop_mistakes() -> list[Mistake]:
    def unless_none(test: Any) -> Any:
        return lambda c, b, beta: False if b is None else test(c, b, beta)

    return [
        Mistake(
            "stops at equality",
            unless_none(lambda c, b, beta: c >= beta * b),
            "at exactly beta x best, go on: stop only when the cost is strictly more",
        ),
        Mistake(
            "ignores beta",
            unless_none(lambda c, b, beta: c > b),
            "a run may cost up to beta x the best cost before it stops: compare with that "
            "budget, not the best cost itself",
        ),
        Mistake(
            "the wrong way round",
            unless_none(lambda c, b, beta: c < beta * b),
            "stop when the cost is more than beta x best, not less",
        ),
    ]


def thompson_pick_ref(posterior: dict[int, tuple[float, float]], z: Sequence[float]) -> int:
    draws = {b: m + s * x for (b, (m, s)), x in zip(posterior.items(), z, strict=True)}
    return min(draws, key=draws.__getitem__)


def _arm_shortcuts(posterior: dict[int, tuple[float, float]], z: Sequence[float]) -> list[int]:
    """Answers that skip the draw or get it wrong: first, last, cheapest mean, smallest z, least
    spread, dearest draw, mean minus spread, smallest and largest batch size."""
    arms = list(posterior)
    return [
        arms[0],
        arms[-1],
        min(arms, key=lambda b: posterior[b][0]),
        arms[min(range(len(z)), key=lambda i: z[i])],
        min(arms, key=lambda b: posterior[b][1]),
        max(arms, key=lambda b: posterior[b][0] + posterior[b][1] * z[arms.index(b)]),
        min(arms, key=lambda b: posterior[b][0] - posterior[b][1] * z[arms.index(b)]),
        min(arms),
        max(arms),
    ]


def thompson_pick_cases() -> list[Case]:
    r = rng("thompson_pick")
    draw_hint = (
        "each arm's draw is mean + std x z (its own z) and the answer is the batch size of the "
        "cheapest draw"
    )

    def random_posterior(r: Any) -> tuple[dict[int, tuple[float, float]], list[float]]:
        arms = r.sample((32, 64, 96, 128, 192, 256, 360, 512), 5)
        post = {b: (round(r.uniform(1e4, 2e4), 1), round(r.uniform(100, 3000), 1)) for b in arms}
        return post, [round(r.gauss(0, 1), 3) for _ in arms]

    def fresh(case: tuple[dict, list]) -> bool:
        answer = thompson_pick_ref(*case)
        return (
            answer not in _arm_shortcuts(*case) and answer not in (128, 64, 360) and telling(case)
        )

    cases = [
        Case(
            "a cheap mean that draws high",
            (
                {256: (95.0, 5.0), 128: (100.0, 10.0), 64: (104.0, 8.0), 512: (130.0, 1.0)},
                [1.5, 0.2, 2.2, -2.0],
            ),
            draw_hint + ", which need not be the cheapest mean",
        ),
        Case(
            "an arm with no spread (std 0)",
            ({128: (52.0, 4.0), 256: (49.0, 1.0), 64: (50.0, 0.0)}, [0.1, 1.5, 3.0]),
            "an arm with std 0 draws its mean",
        ),
        Case(
            "draws below the mean",
            ({192: (60.0, 2.0), 360: (80.0, 20.0), 256: (70.0, 8.0)}, [0.5, -1.0, -1.2]),
            "a negative z draws below the mean, and " + draw_hint,
        ),
    ]
    telling = separating(
        [c.args for c in cases], [thompson_pick_ref, *(m.fn for m in thompson_pick_mistakes())]
    )
    return [*cases, Case("a random posterior", draw(r, random_posterior, fresh), draw_hint)]


def _draw_of(posterior: dict[int, tuple[float, float]], z: Sequence[float], arm: int) -> float:
    mean, std = posterior[arm]
    return mean + std * z[list(posterior).index(arm)]


def thompson_pick_mistakes() -> list[Mistake]:
    def pick(score: Any) -> Any:
        return lambda post, z: min(post, key=lambda b: score(*post[b], z[list(post).index(b)]))

    return [
        Mistake(
            "cheapest mean",
            pick(lambda m, s, x: m),
            "pick the cheapest draw, not the cheapest mean: a draw is mean + std x z",
        ),
        Mistake(
            "minus the spread",
            pick(lambda m, s, x: m - s * x),
            "a draw is mean + std x z (plus): a positive z draws above the mean",
        ),
        Mistake(
            "most expensive draw",
            lambda post, z: max(
                post, key=lambda b: post[b][0] + post[b][1] * z[list(post).index(b)]
            ),
            "run the cheapest draw (the least cost), not the most expensive one",
        ),
        Mistake(
            "smallest z",
            pick(lambda m, s, x: x),
            "z alone is not the cost: scale it by the arm's std and add its mean",
        ),
        Mistake(
            "first arm",
            lambda post, z: next(iter(post)),
            "the first batch size is not special: draw a cost for every one and compare",
        ),
        Mistake(
            "the draw instead of the arm",
            lambda post, z: min(m + s * x for (m, s), x in zip(post.values(), z, strict=True)),
            "return the batch size (the dictionary's key), not its drawn cost",
        ),
        Mistake(
            "the position instead of the arm",
            lambda post, z: min(
                range(len(z)),
                key=lambda i: list(post.values())[i][0] + list(post.values())[i][1] * z[i],
            ),
            "return the batch size (the dictionary's key), not its position",
        ),
    ]
