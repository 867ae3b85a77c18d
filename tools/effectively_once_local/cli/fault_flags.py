"""The fault flags of the ``chaos`` and ``demo`` commands, built from the table of fault classes
(``chaos/fault_classes.py``): the arguments, their checks (the per-invocation draw's sum; a flag ``--no-chaos`` or an
all-zero run would ignore) and the :class:`~effectively_once_local.chaos.fault_model.ChaosConfig` they fill. A
command draws the classes that have a flag for it, and every such flag reaches its field: none is accepted and
dropped (``tests/local/test_fault_classes.py``)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from ..chaos.fault_classes import DRAWN, ChaosConfig, of_command
from .arguments import Given, Parser, fraction


def add(parser: argparse.ArgumentParser, command: str) -> None:
    """``command``'s fraction flag of each fault class it draws, with the table's default and help."""
    for _, flag in of_command(command):
        parser.add_argument(flag.name, type=fraction, action=Given, default=flag.default, help=flag.help)


def chaos_config(args: argparse.Namespace, command: str) -> ChaosConfig:
    """The chaos ``command``'s parsed flags ask for: each class's field from its flag there (0 for a class the
    command does not draw), and ``--seed``."""
    fractions: dict[str, Any] = {cls.field: float(getattr(args, flag.dest)) for cls, flag in of_command(command)}
    return replace(ChaosConfig(seed=args.seed), **fractions)


def check_draw(parser: Parser, args: argparse.Namespace, command: str) -> None:
    """One draw per invocation picks among the fates (``fault_model.InvocationChaos.begin``): their flags' sum must
    not exceed 1."""
    drawn = [flag for cls in DRAWN if (flag := cls.flag_of(command)) is not None]
    total = sum(float(getattr(args, flag.dest)) for flag in drawn)
    if total > 1.0:
        parser.error(
            f"arguments {', '.join(flag.name for flag in drawn)}: one draw per invocation picks among them, so their"
            f" sum must not exceed 1, got {total:g}"
        )


def refuse_under_no_chaos(parser: Parser, args: argparse.Namespace, command: str) -> None:
    """Under ``--no-chaos`` every fraction is 0: a fault flag given above 0 would be ignored, so it is an error."""
    given: set[str] = getattr(args, "given", set())
    for _, flag in of_command(command):
        if flag.dest in given and getattr(args, flag.dest) > 0:
            parser.error(
                f"arguments --no-chaos, {flag.name}: --no-chaos runs without chaos; {flag.name} would be ignored"
            )


def any_asked(args: argparse.Namespace, command: str) -> bool:
    """Whether any of ``command``'s fault flags is above 0 (else nothing is drawn, and ``--seed`` is pointless)."""
    return any(getattr(args, flag.dest) > 0 for _, flag in of_command(command))
