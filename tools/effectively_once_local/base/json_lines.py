"""The one JSON Lines reader of the local tooling's input files (the payments file and the chaos input), and
:func:`read_jsonl`, the reader of the run's own logs.

Every check runs on the whole file before anything is sent, and every error names ``path:line``. A line is parsed
with ``json.loads``; an object that repeats a key is kept (``json.loads`` keeps the last value) with the repeated
names listed, so a caller can send such a line as written: re-encoding it would hide the repetition from the
handler, which must see it to reject the record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any


class JsonLinesError(ValueError):
    """The file cannot be read as JSON Lines; the message names the file, and the line where there is one."""


@dataclass(frozen=True)
class JsonLine:
    number: int  # 1-based line number in the file
    raw: str  # the line as written, stripped of surrounding white space
    data: Any  # the parsed value (the last value of a repeated key)
    repeated: tuple[str, ...]  # names an object on the line repeats, in the order met; () for none


def _object(pairs: list[tuple[str, Any]], repeated: list[str]) -> dict[str, Any]:
    """``json.loads`` object hook: the object, with the keys it repeats added to ``repeated``."""
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            repeated.append(key)
        seen.add(key)
    return dict(pairs)


def read_json_lines(path: Path, *, unreadable_hint: str) -> list[JsonLine]:
    """The non-blank lines of ``path``, parsed.

    :param unreadable_hint: what to do instead, added to the error for a line ``json.loads`` parses but cannot
        convert (an integer over ``sys.get_int_max_str_digits()`` digits, 4,300 by default; nesting past the
        recursion limit): the file format's way of sending a body verbatim.
    :raises JsonLinesError: ``path`` is a folder, cannot be read or is not UTF-8 (naming the line of the first bad
        byte), or a line is not JSON.
    """
    if path.is_dir():
        raise JsonLinesError(f"{path}: is a folder, not a JSON Lines file")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise JsonLinesError(f"{path}: cannot be read: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        at = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise JsonLinesError(f"{path}:{at}: not UTF-8 (byte {exc.start})") from exc
    lines: list[JsonLine] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        repeated: list[str] = []
        try:
            data = json.loads(raw, object_pairs_hook=partial(_object, repeated=repeated))
        except json.JSONDecodeError as exc:
            raise JsonLinesError(f"{path}:{number}: not valid JSON ({exc.msg})") from exc
        except (ValueError, RecursionError) as exc:  # a number over 4,300 digits; nesting past the recursion limit
            reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc).split(":")[0]
            raise JsonLinesError(f"{path}:{number}: cannot be read ({reason}); {unreadable_hint}") from exc
        lines.append(JsonLine(number, raw.strip(), data, tuple(repeated)))
    return lines


def read_jsonl(paths: list[Path]) -> list[dict[str, Any]]:
    """Every JSON line of ``paths``, in order; a line that is not JSON (cut by a kill) is skipped."""
    rows = []
    for path in paths:
        for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                rows.append(json.loads(raw))
            except json.JSONDecodeError:
                continue  # a line cut by a kill
    return rows
