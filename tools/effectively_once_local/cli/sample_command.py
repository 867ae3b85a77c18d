"""``sample``: a deterministic payments file (``payments.payments_input.write_sample``): its arguments and its
options object."""

from __future__ import annotations

import argparse
from typing import Any

from ..payments.payments_input import SampleOptions
from .arguments import Parser, integer, output_file

#: The subcommands this module adds.
NAMES = ("sample",)


def add(sub: argparse._SubParsersAction[Any]) -> None:
    """``sample``: a deterministic payments file."""
    sample = sub.add_parser("sample", help="write a deterministic sample payments file")
    sample.add_argument("--count", type=integer(1), default=1000, help="valid payments (six poison lines are added)")
    sample.add_argument("--accounts", type=integer(1), default=40, help="accounts the payments are spread over")
    sample.add_argument("--seed", type=integer(), default=2026, help="the same seed writes the same file")
    sample.add_argument("--out", type=output_file, default="samples/payments.jsonl", help="the file to write")


def check(parser: Parser, args: argparse.Namespace) -> None:
    """Nothing across ``sample``'s arguments to check: each is checked by its type."""


def options(args: argparse.Namespace) -> SampleOptions:
    """``sample``'s options object, built from its parsed arguments (the one place they are read)."""
    return SampleOptions(count=args.count, accounts=args.accounts, seed=args.seed, out=args.out)


def run(args: argparse.Namespace) -> int:
    from ..payments.payments_input import write_sample

    return write_sample(options(args))
