"""Speaker notes for the slide decks, written for the teacher (reveal.js shows them on ``s``).

Three kinds of note, each put on the slide it is about by :func:`notes_for`:

* the deck's first slide: how long the notebook runs (from the one run-time table,
  :mod:`zeus_nb.course.runtimes`) and what to have ready;
* a section's slide: what to stress there and where students stumble, from :data:`SECTIONS`,
  keyed by the section's heading as the notebook writes it (a test fails when a heading here no
  longer exists in its notebook, so notes cannot drift away from their slides);
* an exercise's slide: what its check tries (the kinds of case) and the hint each known mistake
  gets, from the exercise registry itself, so the notes say what the students will read.
"""

from __future__ import annotations

from typing import Any

from zeus_nb.course import runtimes
from zeus_nb.course.exercises import EXERCISES, MISTAKES
from zeus_nb.course.exercises.base import use_seed
from zeus_nb.inputs.jsonschema_formats import skip_iri_grammar
from zeus_nb.runner import setup

# notebook stem -> {section heading (without the #s) -> the teacher's note}
SECTIONS: dict[str, dict[str, str]] = {
    "01_measuring_energy": {
        "A small model and a training step": (
            "Point at `zeus_nb.step()`: on the simulated GPU it is what moves time forward, on a "
            "real GPU it does nothing. Students who leave it out of their own loops see 0 s "
            "windows on the simulated GPU."
        ),
        "Windows over the run, each epoch and each step": (
            "Ask before running: should the epochs' energies add up to the whole run's? They "
            "do, up to the work between epochs; let the printed sums answer. Nesting is the "
            "point: one monitor, many named windows."
        ),
        "The power timeline": (
            "The timeline says *when* energy is drawn; a window only says how much. Ask what "
            "a flat line at the limit would mean (the GPU is power-bound)."
        ),
        "Zeus's other monitors: power timeline, CPU energy, carbon and cost": (
            "Optional in a short lab. The carbon and cost lines multiply the same joules by "
            "an intensity or a price: stress that the measurement is the energy."
        ),
        "Try it: the power limit": (
            "Let students move the slider during the lab; headless runs skip it. A lower limit "
            "slows a step and lowers its power: ask which effect wins for energy."
        ),
        "What you learned": (
            "Close with the two exercises' formulas: energy over time is power, energy over "
            "steps is energy per step. Notebook 02 chooses a limit from such windows."
        ),
    },
    "02_power_limit_optimizer": {
        "A real profile, replayed": (
            "This log is a real A40 run: every selector below is judged on the same "
            "measurements, so differences come from the criterion alone."
        ),
        "The slowdown knob": (
            "The table shows where a looser budget stops buying energy: below the "
            "energy-optimal limit, time grows faster than power falls. Ask students to find "
            "that row before reading the lines under it."
        ),
        "Live: the optimizer in a training loop": (
            "Four calls wire the optimizer in. The printed limits per epoch show it profiling "
            "first, then holding its choice."
        ),
        "One GPU, two answers: the replayed log and the live run": (
            "Expect the question why the live run disagrees with the replay: the printed lines "
            "compute how close the two limits are in cost on each measurement, which is why "
            "two measurements of one GPU can order them differently."
        ),
        "Reusing a saved profile": (
            "A saved profile skips profiling: worth it for jobs that run again on the same GPU "
            "model."
        ),
        "The Hugging Face Trainer callback": (
            "Skipped with a one-line note when the `hf` extra is missing; nothing later "
            "depends on it."
        ),
        "Try it: one epoch at a limit of your choice": (
            "At low limits the power line sits above the limit: the A40 trace records it, as "
            "the printed line says. Real GPUs do not always hold a low limit."
        ),
        "What you learned": (
            "The energy-optimal limit is rarely the lowest. Notebook 03 adds the batch size as "
            "a second knob."
        ),
    },
    "03_energy_time_tradeoff": {
        "The measured tradeoff": (
            "Each point is a mean over recorded runs to a target accuracy; configurations that "
            "never reached it are missing. Ask which corner a deadline-driven team would pick."
        ),
        "Live: sweep batch size x power limit here": (
            "The live sweep is small on purpose; on the simulated GPU its numbers follow the "
            "traces, so compare its front with the traced one."
        ),
        "How much could be saved?": (
            "Savings are relative to the default batch size at the maximum limit, from the "
            "published traces; the bars are fractions of that energy."
        ),
        "What you learned": (
            "The front is where every sensible choice lies; eta picks a point on it. Notebook "
            "04 learns the batch size across recurrences instead of sweeping."
        ),
    },
    "04_batch_size_optimizer": {
        "The bandit on the traces": (
            "Each bar is one recurrence of the job; its colour is the batch size that "
            "finished it. Ask what the first recurrences are doing (pruning: trying each batch "
            "size) and when the colours settle."
        ),
        "The knobs": (
            "eta moves the answer along the front; beta only decides when a bad run is "
            "stopped. Have students predict each row before it prints."
        ),
        "Compared with the published policy": (
            "Paired runs on the same traces and seeds: the difference column is the fair "
            "comparison, not either saving alone."
        ),
        "Live: a recurring job on this backend": (
            "The same optimizer on live runs of this backend instead of the traces: compare "
            "the batch size it settles on with the traced one."
        ),
        "What you learned": (
            "Pruning first, then Thompson sampling with early stopping. Notebook 05 measures "
            "jobs that span several GPUs."
        ),
    },
    "05_data_parallel": {
        "DistributedDataParallel": (
            "`torchrun` starts the ranks from the notebook; each rank measures its own GPU, and "
            "the exercise after it combines them."
        ),
        "What the optimizer measured": (
            "The ranks' measurements are combined before the selector sees them, so every "
            "GPU gets the same limit."
        ),
        "Fully sharded data parallel": (
            "Same measurement, another way to split the model; compare the two jobs' time "
            "and energy lines."
        ),
        "What you learned": (
            "A job lasts as long as its slowest rank and uses the sum of the ranks' energy. "
            "Notebook 06 turns the slowest-rank idea into per-instruction clocks."
        ),
    },
    "06_pipeline_frequency": {
        "Why 1F1B has slack": (
            "Draw the schedule on the board for 2 stages and 3 microbatches before showing "
            "the print: the gaps are where clocks can drop for free."
        ),
        "The frontier": (
            "Each frontier point is a plan; the fastest keeps the all-max-clock time on less "
            "energy (intrinsic bloat). The star is all max clocks."
        ),
        "Along the frontier: a straggler": (
            "Move the deadline slider live: the timeline redraws with the least-energy plan "
            "for that deadline."
        ),
        "Where a simulated instruction's numbers come from": (
            "Dots are the Zeus measurements, lines the fitted model: this is why the "
            "simulated pipeline's numbers are believable, and where they are not."
        ),
        "Live: profile a 4-stage pipeline on simulated GPUs": (
            "Four processes start three times here: most of the notebook's run time. Start "
            "the cell early and talk over it."
        ),
        "Live: all max clocks against the plan": (
            "On simulated GPUs measured equals predicted: the GPU is the model, as the printed "
            "line says. The run checks that the plan is executed, not that the model is right."
        ),
        "What you learned": (
            "Waiting GPUs still draw power; a plan slows what is off the critical path. "
            "`docs/pipeline_frequency.md` has the model and the CLI."
        ),
    },
}


def title_note(stem: str) -> str:
    """The first slide's note: run times from the one table and what to prepare."""

    table = runtimes.load()
    times = table["notebooks"].get(stem)
    if times is None:
        return "Run the notebook once before class (Kernel, Restart and Run All)."
    return (
        f"Run All takes about {runtimes.fmt(times['full'])} on the simulated GPU "
        f"({runtimes.fmt(times['smoke'])} with `smoke = True`), {runtimes.load_words(table)}. "
        "Run it once before class so the kernel and the "
        "data are warm, and keep `smoke = True` for a quick demo."
    )


def exercise_note(name: str) -> str:
    """What the check of exercise ``name`` tries and the hint each known mistake gets."""

    saved = setup._seed
    use_seed(0)
    try:
        cases = EXERCISES[name][1]()
    finally:
        setup._seed = saved
    lines = [
        f"`check.{name}` tries {len(cases)} kinds of case: "
        + "; ".join(c.kind for c in cases)
        + ". Students see how many are right and a hint, never the expected values; until "
        "their function passes, the notebook goes on with the reference answer.",
        "",
        "Known mistakes and the hint each gets:",
        "",
    ]
    lines += [f"- {m.name}: {m.hint}" for m in MISTAKES[name]()]
    lines += [
        "",
        "Any other wrong answer is told how it differs (too high, another order, ...) and "
        "which rule the failing case checks.",
    ]
    return "\n".join(lines)


def section_note(stem: str, heading: str) -> str | None:
    return SECTIONS.get(stem, {}).get(heading)


def notes_cell(text: str) -> Any:
    """A markdown cell reveal.js shows as speaker notes."""
    skip_iri_grammar()
    import nbformat

    cell = nbformat.v4.new_markdown_cell(text)
    cell.metadata["slideshow"] = {"slide_type": "notes"}
    return cell


def deck_notes(stem: str):
    """The ``notes(key)`` function :func:`zeus_nb.course.slide_layout.lay_out` takes, for the
    deck of notebook ``stem``."""

    def notes(key: str) -> str | None:
        if key == "title":
            return title_note(stem)
        if key.startswith("check:"):
            name = key.removeprefix("check:")
            return exercise_note(name) if name in EXERCISES else None
        return section_note(stem, key)

    return notes
