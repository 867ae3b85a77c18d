"""``sample``: a deterministic payments file (``profiles.payments_input.generate_sample``)."""

from __future__ import annotations

import argparse
from typing import Any

from ..profiles.payments_input import generate_sample
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


def run(args: argparse.Namespace) -> int:
    import json

    rows = generate_sample(args.count, args.accounts, args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    print(f"wrote {len(rows)} lines to {args.out}")
    return 0
