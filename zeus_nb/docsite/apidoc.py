"""API reference pages generated from the docstrings, one markdown page per public module.

The site's API reference is made here with ``inspect`` rather than a documentation plugin, so
building the site needs nothing beyond MkDocs and mkdocs-jupyter. A page lists what the module
itself defines (classes with their public methods and properties, functions), each with its
signature and docstring; names a package only re-exports are documented where they are defined.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import pkgutil
import re
from pathlib import Path
from types import ModuleType

from zeus_nb.utils.files import writes_itself

log = logging.getLogger(__name__)

# command modules are documented by `zeus-nb COMMAND --help`, not as an API
SKIP = ("zeus_nb.commands", "zeus_nb.__main__", "zeus_nb.docsite")


def public_modules(package: str = "zeus_nb") -> list[str]:
    """Importable public module names under ``package`` (no ``_private`` part), sorted."""
    root = importlib.import_module(package)
    names = [package]
    for info in pkgutil.walk_packages(root.__path__, package + "."):
        parts = info.name.split(".")
        if any(p.startswith("_") for p in parts) or info.name.startswith(SKIP):
            continue
        names.append(info.name)
    return sorted(names)


def markdown_docstring(obj: object) -> str:
    """The docstring with reStructuredText literals and roles turned into markdown code."""
    doc = inspect.getdoc(obj) or ""
    doc = re.sub(r":[a-z]+:`~?([^`]+)`", r"`\1`", doc)  # :func:`x` -> `x`
    doc = re.sub(r"``([^`]+)``", r"`\1`", doc)  # ``x`` -> `x`
    return _sections_as_lists(doc)


class _Annotation(str):
    """A string annotation (``from __future__ import annotations``) shown without quotes."""

    def __repr__(self) -> str:
        return str(self)


def _unquoted(annotation: object) -> object:
    return _Annotation(annotation) if isinstance(annotation, str) else annotation


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _stable(default: object) -> object:
    """A default whose repr holds a memory address (a lambda, a plain object) without it, so
    that two builds of the site write the same page."""
    text = repr(default)
    stable = _ADDRESS.sub("", text)
    return default if stable == text else _Annotation(stable)


def _signature(name: str, obj: object) -> str:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return f"{name}(...)"
    params = [
        p.replace(annotation=_unquoted(p.annotation), default=_stable(p.default))
        for p in sig.parameters.values()
    ]
    sig = sig.replace(parameters=params, return_annotation=_unquoted(sig.return_annotation))
    return f"{name}{sig}"


_SECTION = re.compile(r"^(Args|Arguments|Parameters|Returns|Yields|Raises|Attributes):\s*$")
_ITEM = re.compile(r"^ {4}(\S[^:]*):\s*(.*)$")


def _sections_as_lists(doc: str) -> str:
    """Google-style ``Args:`` sections as markdown lists (indented text would run together)."""
    out: list[str] = []
    in_section = False
    for line in doc.splitlines():
        if _SECTION.match(line):
            in_section = True
            out += ["", f"**{line.strip()[:-1]}**", ""]
        elif in_section and (m := _ITEM.match(line)):
            out.append(f"- `{m.group(1)}`: {m.group(2)}")
        elif in_section and line.startswith("    ") and out and out[-1].startswith("- "):
            out[-1] += " " + line.strip()
        else:
            in_section = in_section and line.startswith("    ")
            out.append(line)
    return "\n".join(out)


def _entry(level: str, name: str, obj: object, prefix: str = "") -> list[str]:
    out = [f"{level} `{prefix}{name}`", "", "```python", _signature(name, obj), "```", ""]
    doc = markdown_docstring(obj)
    return out + ([doc, ""] if doc else [])


def _class_members(cls: type) -> list[str]:
    out: list[str] = []
    for name, raw in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(raw, property):
            out += [f"#### `{cls.__name__}.{name}` (property)", ""]
            doc = markdown_docstring(raw)
            out += [doc, ""] if doc else []
        elif isinstance(raw, staticmethod | classmethod) or inspect.isfunction(raw):
            out += _entry("####", name, getattr(cls, name), prefix=f"{cls.__name__}.")
    return out


def defined_here(module: ModuleType) -> list[tuple[str, object]]:
    """Public classes and functions whose home is ``module``, in source order where known."""
    items = []
    for name, obj in vars(module).items():
        if name.startswith("_") or not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        if getattr(obj, "__module__", None) != module.__name__:
            continue
        try:
            line = inspect.getsourcelines(obj)[1]
        except (OSError, TypeError):
            line = 10**9
        items.append((line, name, obj))
    return [(name, obj) for _, name, obj in sorted(items, key=lambda t: (t[0], t[1]))]


def module_page(name: str) -> str:
    """The markdown page of one module."""
    module = importlib.import_module(name)
    out = [f"# `{name}`", ""]
    doc = markdown_docstring(module)
    out += [doc, ""] if doc else []
    if hasattr(module, "__path__"):
        subs = sorted(
            m.name
            for m in pkgutil.iter_modules(module.__path__)
            if m.name[0] != "_" and not f"{name}.{m.name}".startswith(SKIP)
        )
        if subs:
            out += ["Modules: " + ", ".join(f"[`{s}`]({name}.{s}.md)" for s in subs), ""]
    for obj_name, obj in defined_here(module):
        out += _entry("##", obj_name, obj)
        if inspect.isclass(obj):
            out += _class_members(obj)
    return "\n".join(out).rstrip() + "\n"


@writes_itself("the site's build folder, made afresh by each build")
def write_pages(folder: Path, package: str = "zeus_nb") -> list[tuple[str, str]]:
    """Write ``folder/<module>.md`` for every public module; (module, file name) pairs."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name in public_modules(package):
        try:
            text = module_page(name)
        except ImportError as e:  # an optional dependency is missing: document the rest
            log.warning("API reference: skipping %s (%s)", name, e)
            continue
        (folder / f"{name}.md").write_text(text)
        written.append((name, f"{name}.md"))
    return written
