"""Object-name templates of a ``bucket`` effect store (issue 30, item 5): how an S3 object's key names the business
key it is the effect of, without misreading it.

A template holds one placeholder and any number of ``*`` (any characters):

- ``{key}``: the business key itself (``invoices/{key}.json``, ``invoices/{key}-*.json``). It is matched against the
  business keys the run sent, never against any characters: ids that hold ``-`` (``inv-001``) are read whole.
- ``{effect_key}``: the runtime's scoped effect key, ``<key prefix>#<effect>#<key>`` (``effect_keys.scoped``), whose
  last part is matched against the keys the run sent (``receipts/{effect_key}.json``); the business key is that part.

A template that can match one object name two ways for the run's keys (``invoices/{key}-*.json`` with the keys
``inv-1`` and ``inv-1-2``: ``invoices/inv-1-2-x.json`` is either) is refused before anything runs
(:func:`check_template`), with the two keys and the name that shows it. docs/chaos.md ("Stores").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from ..traffic.chaos_input import InputFileError

KEY, EFFECT_KEY = "{key}", "{effect_key}"
#: What a placeholder stands for, before the business key: nothing for ``{key}``; ``<key prefix>#<effect>#`` for
#: ``{effect_key}`` (the prefix may hold ``#`` and ``/``; the effect name holds no ``#``).
_BEFORE_KEY = {KEY: "", EFFECT_KEY: r".+?#[^#]+#"}
#: What stands for a ``*`` and for the scoped key's prefix and effect in a sample name (:func:`check_template`).
_FILLER, _SAMPLE_SCOPE = "x", "p#e#"


class TemplateError(InputFileError):
    """A template without exactly one placeholder, or one that can match a name two ways for the run's keys (an
    ``InputFileError``: the command ends in one line, exit code 2)."""


def placeholder(template: str) -> str:
    """The template's one placeholder (``{key}`` or ``{effect_key}``).

    :raises TemplateError: none, or more than one.
    """
    if template.count(KEY) + template.count(EFFECT_KEY) != 1:
        raise TemplateError(
            f"the object-name template {template!r} needs exactly one of {KEY} (the business key) or {EFFECT_KEY} "
            "(the runtime's scoped effect key) where the key stands"
        )
    return KEY if KEY in template else EFFECT_KEY


def _wildcards(text: str) -> str:
    """``text`` as a pattern: literal, but ``*`` for any characters."""
    return ".*".join(re.escape(part) for part in text.split("*"))


def _pattern(template: str, keys: Iterable[str]) -> re.Pattern[str]:
    """The template with its placeholder matched against ``keys`` (longest first); any characters without keys."""
    mark = placeholder(template)
    head, _, tail = template.partition(mark)
    chosen = sorted(set(keys), key=lambda k: (-len(k), k))
    alternatives = "|".join(re.escape(k) for k in chosen) if chosen else ".+?"
    return re.compile(f"{_wildcards(head)}{_BEFORE_KEY[mark]}(?P<key>{alternatives}){_wildcards(tail)}")


def matcher(template: str, keys: Iterable[str] = ()) -> Callable[[str], str | None]:
    """An object name -> the business key it holds under ``template``, or ``None`` when it matches for none of
    ``keys`` (with no keys: any characters stand for the key, the shortest match).

    :raises TemplateError: as :func:`placeholder`.
    """
    pattern = _pattern(template, keys)

    def key_of(name: str) -> str | None:
        match = pattern.fullmatch(name)
        return None if match is None else match.group("key")

    return key_of


def check_template(template: str, keys: Iterable[str]) -> None:
    """Refuse a template that can match one name for two of ``keys``: each key's sample name (the placeholder
    filled, each ``*`` one character) must match no other key's pattern.

    :raises TemplateError: naming the two keys and the sample name; or as :func:`placeholder`.
    """
    mark = placeholder(template)
    head, _, tail = template.partition(mark)
    chosen = sorted(set(keys))
    patterns = {k: _pattern(template, [k]) for k in chosen}
    scope = _SAMPLE_SCOPE if mark == EFFECT_KEY else ""
    for key in chosen:
        sample = f"{head.replace('*', _FILLER)}{scope}{key}{tail.replace('*', _FILLER)}"
        other = next((k for k in chosen if k != key and patterns[k].fullmatch(sample)), None)
        if other is not None:
            raise TemplateError(
                f"the object-name template {template!r} can match one name two ways for this input: {sample!r} is "
                f"the object of key {key!r} and of key {other!r} (a {mark} followed or preceded by '*' takes any "
                "characters, and one key starts or ends another's); name the objects with a separator no key holds, "
                "or without a '*' next to the key"
            )
