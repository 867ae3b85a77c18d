"""Business identity: the normalisation steps an idempotency key can go through before it is hashed, so that one
business id written in another case, with spaces around it or in full-width characters is one record, not two.

The rules of ``Consumer(normalize=...)`` and of the local chaos tooling's ``--normalize`` (which imports this module;
this module imports nothing of theirs). Standard library only; importing it does nothing.

Steps (``NORMALIZATIONS``), applied in the order given, each to the whole text:

- ``"strip"``: ``str.strip()``, whitespace at both ends (Unicode whitespace: a no-break or an ideographic space too);
- ``"casefold"``: ``str.casefold()``, Unicode case folding (``"ABC-1"`` -> ``"abc-1"``, ``"Straße"`` -> ``"strasse"``);
- ``"nfkc"``: ``unicodedata.normalize("NFKC", ...)``, compatibility composition (full-width ``"ＡＢＣ-１"`` ->
  ``"ABC-1"``, ``"ﬁ"`` -> ``"fi"``).

The order matters: NFKC can produce what the other steps act on. ``("casefold", "nfkc")`` turns ``"ᴬ"`` (a modifier
capital A) into ``"A"``, ``("nfkc", "casefold")`` into ``"a"``; ``("strip", "nfkc")`` turns ``"¨x"`` into ``" ̈x"``
(NFKC gives the diaeresis a leading space), ``("nfkc", "strip")`` into ``"̈x"``. Put ``"nfkc"`` first:
``("nfkc", "strip", "casefold")``.

Numbers are canonical, always (``canonical_numbers``): JSON has one number type, so ``1234.0`` is ``1234`` and
``-0.0`` is ``0``, in a key, inside a multi-select key, and in what ``validate`` found. A string is never a number:
``"1234"`` and ``1234`` are two keys.

A key is what the key JMESPath found (``normalize_key``): its numbers made canonical, then a string gets the steps;
a number, a boolean or ``null`` stays as it is; a list (a multi-select ``[a, b]``) or an object (``{a: a, b: b}``)
gets the steps on every string inside it, at any depth, and keeps its shape: an object's names are the expression's,
not data, and stay as they are.
The key is then serialised as before (``consumer.key_text``, Powertools' hash). A key that normalises to ``""`` (only
whitespace, stripped) is a missing key, like ``""`` itself.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterable, Sequence
from typing import Any

STRIP = "strip"
CASEFOLD = "casefold"
NFKC = "nfkc"
#: Every step ``normalizer`` takes.
NORMALIZATIONS = (CASEFOLD, STRIP, NFKC)


def _nfkc(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


_STEPS: dict[str, Callable[[str], str]] = {CASEFOLD: str.casefold, STRIP: str.strip, NFKC: _nfkc}


def check_steps(steps: str | Iterable[str]) -> tuple[str, ...]:
    """``steps`` as a tuple, in its order: a single string is one step (``"casefold"`` is ``("casefold",)``);
    empty is no normalisation.

    :raises TypeError: ``steps`` is neither a string nor an iterable of strings.
    :raises ValueError: a step is not one of ``NORMALIZATIONS`` (the message names it and the allowed ones).
    """
    if isinstance(steps, str):
        items: tuple[Any, ...] = (steps,)
    else:
        try:
            items = tuple(steps)
        except TypeError:
            raise TypeError(
                f"normalize must be a sequence of step names ({', '.join(NORMALIZATIONS)}), but {steps!r} was given"
            ) from None
    for step in items:
        if not isinstance(step, str):
            raise TypeError(f"normalize steps must be strings ({', '.join(NORMALIZATIONS)}), but {step!r} was given")
        if step not in _STEPS:
            raise ValueError(
                f"unknown normalize step {step!r}: the steps are {', '.join(repr(s) for s in NORMALIZATIONS)}"
            )
    return items


def normalizer(steps: Sequence[str]) -> Callable[[str], str]:
    """The function applying ``steps`` to a text, in the order given; the identity when ``steps`` is empty.

    :raises TypeError: ``steps`` is not a string or a sequence of strings (``check_steps``).
    :raises ValueError: a step is not one of ``NORMALIZATIONS``.
    """
    functions = tuple(_STEPS[step] for step in check_steps(steps))

    def normalize(text: str) -> str:
        for function in functions:
            text = function(text)
        return text

    return normalize


def normalize_key(value: Any, steps: Sequence[str], *, canonical: bool = True) -> Any:
    """``value`` (what the key JMESPath found) with its numbers canonical (``canonical_numbers``), then ``steps``
    applied to it when it is a string, or to every string inside it when it is a list or an object (recursively; an
    object's names stay as they are); anything else is returned as it is.

    :param canonical: ``False`` gives the key as versions before 0.4.0 hashed it (``legacy_hashes``).
    :raises TypeError: ``steps`` is not a string or a sequence of strings.
    :raises ValueError: a step is not one of ``NORMALIZATIONS``.
    """
    if canonical:
        value = canonical_numbers(value)
    if not check_steps(steps):
        return value
    return _apply(value, normalizer(steps))


def canonical_numbers(value: Any) -> Any:
    """``value`` with every number in one form: a float with an integral value is the integer (``1234.0`` ->
    ``1234``, ``-0.0`` -> ``0``, ``1e3`` -> ``1000``), inside lists and objects too (an object's names stay as they
    are); other floats, strings (``"1234"`` stays a string), booleans and ``null`` stay as they are. JSON has one
    number type, and a producer that writes ``1234.0`` means the ``1234`` another writes: one key, one record, one
    effect. The one rule for keys and ``validate`` in the runtime and in the chaos tooling's inputs."""
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, (list, tuple)):
        return [canonical_numbers(item) for item in value]
    if isinstance(value, dict):
        return {name: canonical_numbers(item) for name, item in value.items()}
    return value


def has_integral_float(value: Any) -> bool:
    """Whether ``canonical_numbers`` changes ``value``: a float with an integral value somewhere in it."""
    if isinstance(value, float):
        return value.is_integer()
    if isinstance(value, (list, tuple)):
        return any(has_integral_float(item) for item in value)
    if isinstance(value, dict):
        return any(has_integral_float(item) for item in value.values())
    return False


def _apply(value: Any, normalize: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return normalize(value)
    if isinstance(value, (list, tuple)):
        return [_apply(item, normalize) for item in value]
    if isinstance(value, dict):
        return {name: _apply(item, normalize) for name, item in value.items()}
    return value
