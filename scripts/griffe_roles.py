"""A griffe extension (mkdocs.yml: the mkdocstrings Python handler's ``extensions``) that renders the house's Sphinx
docstring markup on the API pages and leaves the docstrings as they are written.

- ``:class:`X```, ``:func:``, ``:meth:``, ``:attr:``, ``:data:``, ``:exc:``, ``:mod:``, ``:obj:``: a link to the
  object's entry on the API pages (a mkdocs-autorefs cross-reference) when griffe resolves the name from the
  docstring's scope (its object, then the enclosing ones, as Sphinx does) to an object the pages render; a leading
  ``~`` shows the last component only, as in Sphinx. A name the pages do not render (a private module's helper, an
  aws-cdk-lib class) stays code (``mkdocs build -v`` lists each: ``docs: not on the API pages``).
- ``:default:`` (the house's default-value field, inside a ``:param:`` or a docstring) becomes ``*Default:*``.

The API pages are the ``::: <module>`` lines of ``docs/api/*.md``; what they render follows the handler's options in
mkdocs.yml (public names, ``__all__`` where a module has one, objects with a docstring). A link to an object that is
not rendered after all is an autorefs warning, which fails ``mkdocs build --strict``.

Runs on ``on_package``, before any docstring is parsed (griffe parses one when it is first rendered).
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import griffe

__all__ = ["SphinxRoles"]

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|data|exc|mod|obj|const):`(?P<tilde>~?)(?P<target>[\w.]+)`")
_DEFAULT = ":default:"
_API_PAGES = Path(__file__).resolve().parent.parent / "docs" / "api"
_DIRECTIVE = re.compile(r"^::: +(?P<path>[\w.]+)", re.MULTILINE)
_log = logging.getLogger("mkdocs.plugins.griffe_roles")


def api_roots(pages: Path = _API_PAGES) -> list[str]:
    """The module paths the API pages render (``::: <path>`` lines), in page order."""
    return [match["path"] for page in sorted(pages.glob("*.md")) for match in _DIRECTIVE.finditer(page.read_text())]


class SphinxRoles(griffe.Extension):
    """Rewrites the roles as Markdown cross-references (or code) and ``:default:`` as ``*Default:*`` in every
    docstring of a loaded package: modules, classes, functions, attributes. Aliases are skipped (their targets are
    rewritten where they are defined)."""

    def __init__(self, roots: list[str] | None = None) -> None:
        super().__init__()
        self._roots = roots
        self._rendered: set[str] | None = None
        self._collection: griffe.ModulesCollection | None = None

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        self._collection = loader.modules_collection
        self._rendered = None  # another package may add rendered objects
        self._rewrite(pkg)

    def _rewrite(self, obj: griffe.Object) -> None:
        if obj.docstring is not None:
            text = _ROLE.sub(lambda match: self._reference(obj, match), obj.docstring.value)
            obj.docstring.value = text.replace(_DEFAULT, "*Default:*")
        for member in obj.members.values():
            if not member.is_alias:
                self._rewrite(member)  # type: ignore[arg-type]

    def _reference(self, obj: griffe.Object, match: re.Match[str]) -> str:
        target = match["target"]
        title = target.rsplit(".", 1)[-1] if match["tilde"] else target
        path = self._resolve(obj, target)
        if path is None or path not in self._rendered_paths():
            _log.debug("docs: not on the API pages: %s (in the docstring of %s), shown as code", target, obj.path)
            return f"`{title}`"
        return f"[`{title}`][{path}]"

    def _resolve(self, obj: griffe.Object, target: str) -> str | None:
        """The canonical path of the object ``target`` names from ``obj``'s scope (else ``target`` read as a full
        path), or None when griffe knows no such object."""
        first, _, rest = target.partition(".")
        candidates = [target]
        try:
            resolved = obj.resolve(first)
        except griffe.NameResolutionError:
            pass
        else:
            candidates.insert(0, f"{resolved}.{rest}" if rest else resolved)
        for path in candidates:
            found = self._get(path)
            if found is not None:
                return str(found.canonical_path)
        return None

    def _get(self, path: str) -> griffe.Object | None:
        assert self._collection is not None
        try:
            found = self._collection[path]
            found.canonical_path  # noqa: B018 - resolves an alias, or raises
        except (KeyError, ValueError, griffe.AliasResolutionError, griffe.CyclicAliasError):
            return None
        return found  # type: ignore[no-any-return]

    def _rendered_paths(self) -> set[str]:
        """The canonical paths of the objects the API pages render."""
        if self._rendered is None:
            self._rendered = set()
            for root in self._roots if self._roots is not None else api_roots():
                module = self._get(root)
                if module is not None:
                    self._add_rendered(module, top=True)
        return self._rendered

    def _add_rendered(self, obj: griffe.Object, *, top: bool = False) -> None:
        assert self._rendered is not None
        if obj.is_alias:
            obj = obj.final_target  # type: ignore[attr-defined]
        self._rendered.add(str(obj.canonical_path))
        exports = getattr(obj, "exports", None) if obj.is_module else None
        for name, member in obj.members.items():
            if name.startswith("_") or (exports is not None and name not in exports):
                continue
            if member.is_alias and not (obj.is_module and exports is not None):
                continue  # an import, not an export
            target = self._get(str(member.path))
            if target is None or (not target.has_docstrings) or (target.is_module and not top):
                continue
            self._add_rendered(target)
