"""The run page's chart (``page.py`` embeds it as a PNG): the run's timed events over time, drawn with matplotlib
(Agg backend: no display).

The time axis starts at the first send (:func:`origin`): the local AWS's start and the deploy before it are one
labelled bar left of zero, not to scale, so the run fills the width however long the deploy took. Each series'
figure in the legend is what it counted up to the report (the same figure, by the same name, as the page's table of
timed events, column "all"); where the asynchronous leg has a share, the label says how much was on the queues (what
the report's totals count) and how much on the leg; the events after the report (the outage backlog, the on-failure
redrive) are named apart: ``(+N after the report)``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["KINDS", "TimedEvent", "chart", "figures", "origin"]

#: The kinds of :class:`TimedEvent`, in the order the page shows them, with their labels.
KINDS = {
    "sent": "messages sent",
    "delivery": "deliveries",
    "charge": "charges (provider)",
    "effect": "effects (effect lines)",
    "duplicate_suppressed": "duplicates suppressed",
    "dlq_arrival": "DLQ arrivals (runtime, first sight)",
    "kill": "kills",
}
#: One colour and line style per cumulative series, the same in every run whatever series it has.
_STYLES = {
    "sent": ("tab:blue", "-"),
    "delivery": ("tab:orange", "-"),
    "charge": ("tab:green", "-"),
    "effect": ("tab:red", "--"),  # dashed: in the payments demo it runs on top of the charges
    "duplicate_suppressed": ("tab:blue", "-"),
    "dlq_arrival": ("tab:orange", "-"),
}
#: One colour per kill kind (tab10 colours the cumulative lines do not use first).
_KILL_COLOURS = ("tab:red", "tab:purple", "tab:olive", "tab:cyan", "tab:brown")
#: The bar that stands for the start-up and the deploy, as a share of the run's width.
LEAD_WIDTH = 0.06


@dataclass(frozen=True)
class TimedEvent:
    """One thing that happened in a run. ``t``: wall-clock epoch seconds; ``kind``: a key of :data:`KINDS`;
    ``queue``: the mapping's label; ``detail``: a kill's phase; ``count``: how many (a batch, an EMF sum)."""

    t: float
    kind: str
    queue: str
    detail: str = ""
    count: int = 1


def origin(events: Iterable[TimedEvent], started: float) -> float:
    """Where the time axis starts: the first send (epoch seconds); without sends the first event; without events
    ``started``."""
    timed = sorted(events, key=lambda e: e.t)
    sends = [e.t for e in timed if e.kind == "sent"]
    return sends[0] if sends else (timed[0].t if timed else started)


def figures(events: Iterable[TimedEvent], report_at: float | None, key: str = "kind") -> dict[str, tuple[int, int]]:
    """Per kind (``key="detail"``: per kill phase), the events up to ``report_at`` and after it (``(n, 0)`` when
    ``report_at`` is ``None``): the figures the legend shows."""
    before: Counter[str] = Counter()
    after: Counter[str] = Counter()
    for e in events:
        (after if report_at is not None and e.t > report_at else before)[getattr(e, key)] += e.count
    return {name: (before[name], after[name]) for name in sorted({*before, *after})}


#: The label prefix of the asynchronous leg's queues (EventBridge, SNS, direct invocations: ``async-<function>``).
ASYNC = "async"


def _label(name: str, events: list[TimedEvent], report_at: float | None) -> str:
    """``name: N`` with N the events up to the report (the timed table's figure); when the asynchronous leg has a
    share, how much of N was on the queues (the report's totals count the queues only) and how much on the leg;
    then the events after the report apart."""
    counted = figures(events, report_at, key="queue")
    before = sum(n for n, _ in counted.values())
    after = sum(a for _, a in counted.values())
    leg = sum(n for queue, (n, _) in counted.items() if queue.startswith(ASYNC))
    lines = [f"{name}: {before:,}"]
    if leg:
        lines.append(f"  {before - leg:,} on the queues, {leg:,} on the asynchronous leg")
    if after:
        lines.append(f"  +{after:,} after the report")
    return "\n".join(lines)


def _cumulative(events: list[TimedEvent], zero: float) -> tuple[list[float], list[int]]:
    xs, ys, n = [0.0], [0], 0
    for e in events:
        n += e.count
        xs.append(e.t - zero)
        ys.append(n)
    return xs, ys


def chart(
    events: list[TimedEvent], started: float, marks: list[tuple[float, str]], report_at: float | None = None
) -> Any:
    """The figure: messages through the pipeline, the guards at work (cumulative), the kills by kind; seconds since
    the first send, the start-up and deploy before it as one bar; ``marks`` (time, name) as dashed lines."""
    import matplotlib

    matplotlib.use("Agg")  # no display
    import matplotlib.pyplot as plt

    zero = origin(events, started)
    by_kind: dict[str, list[TimedEvent]] = {k: [e for e in events if e.kind == k] for k in KINDS}
    shown = [(t, text) for t, text in marks if t > zero]
    end = max([e.t - zero for e in events] + [t - zero for t, _ in shown] + [1.0])
    fig, (flow, guards, kills) = plt.subplots(
        3, 1, figsize=(13, 11), sharex=True, height_ratios=[3, 2, 1.8], layout="constrained"
    )
    for ax, kinds, title in (
        (flow, ("sent", "delivery", "charge", "effect"), "Messages through the pipeline (cumulative)"),
        (guards, ("duplicate_suppressed", "dlq_arrival"), "The guards at work (cumulative)"),
    ):
        for kind in (k for k in kinds if by_kind[k]):
            xs, ys = _cumulative(by_kind[kind], zero)
            colour, style = _STYLES[kind]
            label = _label(KINDS[kind], by_kind[kind], report_at)
            ax.step([*xs, end], [*ys, ys[-1]], where="post", linewidth=2, color=colour, linestyle=style, label=label)
        ax.set_title(title, loc="left", fontsize=12)
        ax.set_ylabel("count")
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            # Outside the axes, on the right: it never hides a curve or a mark's label.
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=10, frameon=False)
        else:
            ax.text(0.5, 0.5, "none in this run", transform=ax.transAxes, ha="center", va="center", color="gray")
    _draw_kills(kills, by_kind["kill"], zero, report_at)
    kills.set_xlabel("seconds since the first send" if by_kind["sent"] else "seconds since the first timed event")
    _draw_lead(fig, (flow, guards, kills), zero - started, end)
    _draw_marks(fig, (flow, guards, kills), zero, end, shown)
    return fig


def _draw_lead(fig: Any, axes: tuple[Any, ...], seconds: float, end: float) -> None:
    """The start-up and the deploy before the first send: one grey bar left of zero, labelled with its length."""
    width = end * LEAD_WIDTH
    for ax in axes:
        ax.axvspan(-width, 0, color="0.88", linewidth=0)
    axes[0].set_xlim(-width, end * 1.02)
    axes[0].text(
        -width / 2,
        0.5,
        f"start-up and deploy: {seconds:,.0f} s (not to scale)",
        transform=axes[0].get_xaxis_transform(),
        rotation=90,
        ha="center",
        va="center",
        fontsize=9,
        color="dimgray",
    )


def _draw_kills(kills: Any, events: list[TimedEvent], zero: float, report_at: float | None) -> None:
    """The kills panel: one row of marks per kind (its count in the row's label), or a note that none struck."""
    phases = sorted({e.detail for e in events})
    for i, phase in enumerate(phases):
        hits = [e for e in events if e.detail == phase]
        colour = _KILL_COLOURS[i % len(_KILL_COLOURS)]
        label = _label(phase, hits, report_at)
        kills.scatter([e.t - zero for e in hits], [i] * len(hits), marker="x", s=50, color=colour, label=label)
    kills.set_yticks(range(len(phases)), phases)
    kills.set_ylim(-0.7, max(len(phases), 1) - 0.3)
    if phases:
        kills.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=10, frameon=False)
    kills.set_title("Kills of the execution environment, by kind (the chaos log)", loc="left", fontsize=12)
    kills.grid(True, axis="x", alpha=0.3)
    if not phases:
        kills.text(0.5, 0.5, "no kills in this run", transform=kills.transAxes, ha="center", va="center", color="gray")


def _draw_marks(fig: Any, axes: tuple[Any, ...], zero: float, end: float, marks: list[tuple[float, str]]) -> None:
    """The run's marks (``marks``: time, name) as dashed lines across ``axes``, named at the top of the first."""
    flow = axes[0]
    fig.draw_without_rendering()  # lays the axes out: their width in pixels decides where each label fits
    left, right = flow.get_xlim()
    px_per_second = flow.bbox.width / (right - left)
    # A label is its mark's name turned upright beside its own line, on the line's left unless the previous label
    # already sits left of a line closer than a label's thickness (then on the right: the two face away).
    thickness = 9 * fig.dpi / 72 + 8
    previous: tuple[float, str] | None = None
    for t, text in marks:
        x = (t - zero - left) * px_per_second
        close = previous is not None and x - previous[0] < thickness
        side = "right" if x < thickness or (close and previous is not None and previous[1] == "left") else "left"
        for ax in axes:
            ax.axvline(t - zero, color="gray", linestyle="--", linewidth=1)
        flow.annotate(
            text,
            (t - zero, 1),
            xycoords=("data", "axes fraction"),
            xytext=(2 if side == "right" else -2, -4),
            textcoords="offset points",
            rotation=90,
            ha="left" if side == "right" else "right",
            va="top",
            fontsize=9,
            color="dimgray",
            bbox={"boxstyle": "square,pad=0.1", "facecolor": "white", "edgecolor": "none", "alpha": 0.8},
        )
        previous = (x, side)


def png(events: list[TimedEvent], started: float, marks: list[tuple[float, str]], report_at: float | None) -> bytes:
    """The chart as PNG bytes (100 dpi)."""
    import io

    import matplotlib.pyplot as plt

    fig = chart(events, started, marks, report_at)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()
