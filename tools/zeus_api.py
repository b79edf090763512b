"""Record the public API of a Zeus release wheel, and check zeus-nb against it.

    python tools/zeus_api.py record zeus-0.16.0-py3-none-any.whl  # tools/zeus_api/zeus-<v>.json
    python tools/zeus_api.py doc  # rewrites the table in docs/zeus_compat.md

The wheel is read as source text (``ast``), never imported, so recording needs none of Zeus's
dependencies. A public name is a module-level function, class or constant whose name has no
leading underscore, and, in a package's ``__init__``, a name it re-exports from Zeus itself.
For callables the parameters (name, kind, default as source text) are kept; for classes their
``__init__``, their public methods and properties, and dataclass-style fields.
"""

from __future__ import annotations

import ast
import json
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
RECORDS = HERE / "zeus_api"
SKIP_NAMES = {"logger", "T"}  # module loggers and type variables are not API


def _params(args: ast.arguments) -> list[dict]:
    out = []
    positional = [*args.posonlyargs, *args.args]
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    for i, (a, d) in enumerate(zip(positional, defaults, strict=True)):
        kind = "POSITIONAL_ONLY" if i < len(args.posonlyargs) else "POSITIONAL_OR_KEYWORD"
        out.append({"name": a.arg, "kind": kind, "default": None if d is None else ast.unparse(d)})
    if args.vararg:
        out.append({"name": args.vararg.arg, "kind": "VAR_POSITIONAL", "default": None})
    for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        out.append(
            {
                "name": a.arg,
                "kind": "KEYWORD_ONLY",
                "default": None if d is None else ast.unparse(d),
            }
        )
    if args.kwarg:
        out.append({"name": args.kwarg.arg, "kind": "VAR_KEYWORD", "default": None})
    return out


def _function(node) -> dict:
    params = _params(node.args)
    return {
        "kind": "function",
        "params": params,
        "returns": ast.unparse(node.returns) if node.returns else None,
    }


def _class(node: ast.ClassDef) -> dict:
    info: dict = {
        "kind": "class",
        "bases": [ast.unparse(b) for b in node.bases],
        "methods": {},
        "fields": [],
    }
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            decorators = {ast.unparse(d) for d in item.decorator_list}
            if item.name == "__init__":
                info["init"] = _params(item.args)[1:]
            elif not item.name.startswith("_"):
                entry = _function(item)
                if "property" in decorators:
                    entry = {"kind": "property"}
                elif "staticmethod" not in decorators:
                    entry["params"] = entry["params"][1:]
                info["methods"][item.name] = entry
        elif (
            isinstance(item, ast.AnnAssign)
            and isinstance(item.target, ast.Name)
            and not item.target.id.startswith("_")
        ):
            info["fields"].append(item.target.id)
    return info


def _module_name(path: str) -> str:
    parts = Path(path).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def record(wheel: Path) -> dict:
    """The public names of every module in ``wheel``: {module: {name: info}}."""
    api: dict[str, dict] = {}
    with zipfile.ZipFile(wheel) as zf:
        for path in sorted(zf.namelist()):
            if not (path.startswith("zeus/") and path.endswith(".py")):
                continue
            module = _module_name(path)
            tree = ast.parse(zf.read(path).decode())
            is_package = path.endswith("__init__.py")
            names: dict[str, dict] = {}
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names[node.name] = _function(node)
                elif isinstance(node, ast.ClassDef):
                    names[node.name] = _class(node)
                elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for t in targets:
                        if isinstance(t, ast.Name):
                            names[t.id] = {"kind": "constant"}
                elif (
                    is_package
                    and isinstance(node, ast.ImportFrom)
                    and (node.level or (node.module or "").startswith("zeus"))
                ):
                    for alias in node.names:
                        names[alias.asname or alias.name] = {"kind": "reexport"}
            api[module] = {
                n: i
                for n, i in sorted(names.items())
                if not n.startswith("_") and n not in SKIP_NAMES and n != "*"
            }
    return api


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "record":
        wheel = Path(argv[1])
        version = wheel.name.split("-")[1]
        RECORDS.mkdir(exist_ok=True)
        out = RECORDS / f"zeus-{version}.json"
        doc = {"wheel": wheel.name, "version": version, "modules": record(wheel)}
        out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        names = sum(len(v) for v in doc["modules"].values())
        print(f"{out}: {names} names in {len(doc['modules'])} modules")
        return 0
    if argv == ["doc"]:
        from zeus_compat import write_doc  # noqa: PLC0415 (tools/ is this script's folder)

        print(write_doc())
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    raise SystemExit(main(sys.argv[1:]))
