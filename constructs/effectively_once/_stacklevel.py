"""Where a warning raised inside the library points: the user's line, not the library's own.

``warnings.warn`` shows (and filters) a warning at the frame its ``stacklevel`` names. A construct is called
through jsii (its metaclass calls ``__init__``) and through the library's own helpers, so a fixed ``stacklevel``
would name a line of this package or of jsii. :func:`caller_stacklevel` counts the frames to the first one outside
both. Used by every ``DeprecationWarning`` of the constructs (``_deprecated_props``,
``IdempotentQueueConsumer(async_invocation=...)``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import jsii

#: The files whose frames are skipped: this package's, and jsii's.
_INTERNAL_FILES = (str(Path(__file__).parent), str(Path(jsii.__file__).parent))


def caller_stacklevel() -> int:
    """``warnings.warn``'s ``stacklevel`` (for a call from this function's caller) of the first frame outside this
    package and jsii: the line that called the construct (``PaymentProcessor(...)``), where the warning is shown and
    filtered.

    :returns: 1 or more (1: the caller itself is outside both).
    """
    frame = sys._getframe(1)  # the frame that calls warnings.warn: stacklevel 1
    level = 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_INTERNAL_FILES):
        frame = frame.f_back
        level += 1
    return level
