"""The boundary holds by construction: these tests find every reader, writer, environment
variable and command-line option in the package by themselves, and fail for one that skips
the boundary (``zeus_nb.inputs``, ``zeus_nb.utils.files``, ``zeus_nb.utils.boundary``).

A new reader, writer, variable or sub-command therefore cannot arrive unguarded: it fails here
until it is declared (and, for readers and sub-commands, until the battery in
``tests/test_reliability_battery.py`` covers it).
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import zeus_nb
from zeus_nb.inputs.registry import READERS

PACKAGE = Path(zeus_nb.__file__).parent
BOUNDARY = {PACKAGE / "inputs", PACKAGE / "utils" / "files.py"}


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        if any(path == b or b in path.parents for b in BOUNDARY):
            continue
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(rel.parts).removesuffix(".__init__")
        yield name, ast.parse(path.read_text(), str(path))


def _functions(tree: ast.Module, module: str) -> Iterator[tuple[str, ast.AST]]:
    """(module.qualname, node) of every function, methods and nested functions included."""

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, ast.AST]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}.{child.name}"
                yield name, child
                yield from walk(child, f"{name}.<locals>")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}.{child.name}")

    yield from walk(tree, module)


def _own_calls(fn: ast.AST) -> Iterator[ast.Call]:
    """Calls in ``fn``'s own body (not in functions nested in it)."""
    stack = list(ast.iter_child_nodes(fn))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Call):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _name(call: ast.Call) -> tuple[str | None, str | None]:
    """(object name or None, attribute or function name) of a call."""
    f = call.func
    if isinstance(f, ast.Attribute):
        base = f.value.id if isinstance(f.value, ast.Name) else None
        return base, f.attr
    if isinstance(f, ast.Name):
        return None, f.id
    return None, None


def _mode(call: ast.Call, position: int) -> str:
    arg = call.args[position] if len(call.args) > position else None
    for k in call.keywords:
        if k.arg == "mode":
            arg = k.value
    return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else "r"


def _in_memory(call: ast.Call) -> bool:
    """``read_csv(io.StringIO(text))``, ``Image.open(io.BytesIO(data))``: parses bytes already
    read, opens no file."""
    first = call.args[0] if call.args else None
    return isinstance(first, ast.Call) and _name(first)[1] in ("StringIO", "BytesIO")


def _reads(fn: ast.AST) -> set[str]:
    """The raw read primitives ``fn`` calls itself."""
    found = set()
    for call in _own_calls(fn):
        base, name = _name(call)
        if _in_memory(call):
            continue
        attribute = isinstance(call.func, ast.Attribute)  # read_text(...) alone: zeus_nb.inputs
        if name in ("create_engine", "create_async_engine") or (
            attribute and name in ("read_text", "read_bytes", "read_csv", "DictReader")
        ):
            found.add(name)
        elif (base, name) in (("csv", "reader"), ("json", "load"), ("sqlite3", "connect")):
            found.add(f"{base}.{name}")
        elif (base, name) == ("nbformat", "read"):
            found.add("nbformat.read")
        elif name == "open" and base in (None, "io", "builtins"):
            if not set(_mode(call, 1)) & set("wax+"):
                found.add("open")
        elif name == "open" and base not in (None, "os") and not set(_mode(call, 0)) & set("wax+"):
            found.add("Path.open")
    return found


def _writes_mode(call: ast.Call, base: str | None) -> bool:
    return bool(set(_mode(call, 1 if base in (None, "io") else 0)) & set("wax+"))


def _writes(fn: ast.AST) -> set[str]:
    """The raw write primitives ``fn`` calls itself."""
    found = set()
    for call in _own_calls(fn):
        base, name = _name(call)
        if name in ("write_text", "write_bytes") or (base, name) == ("json", "dump"):
            found.add(name)
        elif name == "to_csv" and call.args:
            found.add("to_csv")
        elif (base, name) in (("os", "replace"), ("os", "rename"), ("shutil", "copyfile")):
            found.add(f"{base}.{name}")
        elif name == "open" and base != "os" and _writes_mode(call, base):
            found.add("open for writing")
    return found


def _decorators(fn: ast.AST, mark: str) -> list[ast.AST]:
    found = []
    for d in getattr(fn, "decorator_list", []):
        target = d.func if isinstance(d, ast.Call) else d
        if (isinstance(target, ast.Name) and target.id == mark) or (
            isinstance(target, ast.Attribute) and target.attr == mark
        ):
            found.append(d)
    return found


def _decorated_reader(fn: ast.AST) -> bool:
    return bool(_decorators(fn, "reader"))


#: Every mark that says why a function is exempt from a check, with the reason in words.
MARKS = ("not_input", "system_read", "environ_read", "writes_itself", "unlocked_update")


def _marked(fn: ast.AST, *marks: str) -> bool:
    """Whether ``fn`` carries one of the boundary's marks (``zeus_nb.inputs.registry``:
    ``not_input``, ``system_read``, ``environ_read``) or the write path's
    (``zeus_nb.utils.files``: ``writes_itself``, ``unlocked_update``)."""
    return any(_decorators(fn, m) for m in marks)


def test_every_mark_says_why_in_words():
    """A mark is ``@not_input("why")`` (or ``system_read``/``environ_read``, or the write
    path's ``writes_itself``/``unlocked_update``): the reason is a literal sentence on the
    function itself, where a reader of the code sees it."""
    bare = []
    for module, tree in _modules():
        for qualname, fn in _functions(tree, module):
            for mark in MARKS:
                for d in _decorators(fn, mark):
                    why = d.args[0] if isinstance(d, ast.Call) and len(d.args) == 1 else None
                    ok = isinstance(why, ast.Constant) and isinstance(why.value, str)
                    if not ok or len(why.value.split()) < 2:
                        bare.append(f"{qualname} (@{mark})")
    assert not bare, f"a boundary mark without its reason: {bare}"


def _marked_functions(mark: str) -> set[str]:
    return {
        q for module, tree in _modules() for q, fn in _functions(tree, module) if _marked(fn, mark)
    }  # fmt: skip


# --- readers -----------------------------------------------------------------------------------
INPUT_READS = {"read_table", "read_json", "read_text", "read_bytes", "read_ipynb", "regular_file"}


def test_every_function_that_reads_is_a_declared_reader_or_says_why_not():
    """Opening, reading or connecting outside ``zeus_nb.inputs`` needs ``@reader(SCHEMA)`` or
    the mark ``@not_input("why")`` (or ``@system_read("why")``) from ``zeus_nb.inputs.registry``."""
    undeclared, seen = [], set()
    for module, tree in _modules():
        for qualname, fn in _functions(tree, module):
            reads = _reads(fn)
            if {n for b, n in map(_name, _own_calls(fn)) if b in (None, "inputs")} & INPUT_READS:
                seen.add(qualname)  # not_input may also say why a boundary read is no input
            if not reads:
                continue
            seen.add(qualname)
            if not _decorated_reader(fn) and not _marked(fn, "not_input", "system_read"):
                undeclared.append(f"{qualname} ({', '.join(sorted(reads))})")
    assert not undeclared, "read outside the input boundary: " + "; ".join(undeclared)
    stale = sorted(_marked_functions("not_input") - seen)
    assert not stale, f"marked not_input but read nothing (any more): {stale}"


def _calls_by_name(fn: ast.AST) -> set[str]:
    return {n for _, n in map(_name, _own_calls(fn)) if n}


def test_every_file_opened_is_checked_to_be_a_regular_file_of_bounded_size():
    """A FIFO blocks a reader forever and ``/dev/zero`` never ends: a function that opens a file
    itself (not through ``read_bytes``/``read_text``/``read_json``/``read_table``/
    ``read_ipynb``, which check it) must call ``regular_file`` first, or carry
    ``@system_read("why")`` (kernel files, package data, the checkout, a private temporary
    folder)."""
    unchecked, seen = [], set()
    for module, tree in _modules():
        for qualname, fn in _functions(tree, module):
            reads = _reads(fn)
            if not reads:
                continue
            seen.add(qualname)
            if _marked(fn, "system_read"):
                continue
            if "regular_file" not in _calls_by_name(fn):
                unchecked.append(f"{qualname} ({', '.join(sorted(reads))})")
    assert not unchecked, "opens a file without regular_file(): " + "; ".join(unchecked)
    stale = sorted(_marked_functions("system_read") - seen)
    assert not stale, f"marked system_read but open nothing: {stale}"


def _covered(q: str, fns: dict, callers: dict, seen: frozenset = frozenset()) -> bool:
    """Declared, or a private helper whose callers (in its module) are all covered."""
    if _decorated_reader(fns[q]) or _marked(fns[q], "not_input", "system_read"):
        return True
    who = callers.get(q, set()) - seen - {q}
    return (
        q.rsplit(".", 1)[-1].startswith("_")
        and bool(who)
        and all(_covered(c, fns, callers, seen | {q}) for c in who)
    )


def test_every_caller_of_the_boundary_readers_is_declared():
    """A function that reads through ``read_table``/``read_json``/``read_text`` is a declared
    reader, or a private helper that only declared readers call."""
    problems = []
    for module, tree in _modules():
        fns = dict(_functions(tree, module))
        callers: dict[str, set[str]] = {}
        for q, fn in fns.items():
            for call in _own_calls(fn):
                short = _name(call)[1]
                for other in fns:
                    if other.rsplit(".", 1)[-1] == short:
                        callers.setdefault(other, set()).add(q)

        for q, fn in fns.items():
            names = {n for base, n in map(_name, _own_calls(fn)) if base in (None, "inputs")}
            if names & INPUT_READS and not _covered(q, fns, callers):
                problems.append(q)
    assert not problems, f"reads through zeus_nb.inputs but is not a declared reader: {problems}"


def _import_all() -> None:
    for info in pkgutil.walk_packages(zeus_nb.__path__, "zeus_nb."):
        if info.name.startswith(("zeus_nb._notebooks", "zeus_nb.__main__")) or ".__main__" in (
            info.name
        ):
            continue
        try:
            importlib.import_module(info.name)
        except ImportError as e:  # an optional extra that is not installed
            if getattr(e, "name", "") and not e.name.startswith("zeus_nb"):
                continue
            raise


def test_the_registry_holds_exactly_the_decorated_readers():
    _import_all()
    decorated = {
        q for module, tree in _modules() for q, fn in _functions(tree, module)
        if _decorated_reader(fn)
    }  # fmt: skip
    assert set(READERS) == decorated


# --- writers -----------------------------------------------------------------------------------
def test_files_are_written_only_through_the_write_path():
    """Writing outside ``zeus_nb.utils.files`` needs the mark ``@files.writes_itself("why")``
    on the function that writes."""
    found, problems = set(), []
    for module, tree in _modules():
        for qualname, fn in _functions(tree, module):
            writes = _writes(fn)
            if writes:
                found.add(qualname)
                if not _marked(fn, "writes_itself"):
                    problems.append(f"{qualname} ({', '.join(sorted(writes))})")
    assert not problems, "writes outside zeus_nb.utils.files, unmarked: " + "; ".join(problems)
    stale = sorted(_marked_functions("writes_itself") - found)
    assert not stale, f"marked writes_itself but write nothing: {stale}"


_RAW_APPENDS = {"append_line", "end_with_newline"}


def test_appenders_write_only_rows_their_reader_accepts():
    """Appending goes through ``files.append_rows`` (rows checked by the reader's schema, a
    complete last row kept): ``append_line`` or ``end_with_newline`` called elsewhere would
    write unchecked rows or cut a whole one."""
    raw = [
        q
        for module, tree in _modules()
        for q, fn in _functions(tree, module)
        if _calls_by_name(fn) & _RAW_APPENDS
    ]
    assert not raw, f"appends without the reader's checks (use files.append_rows): {raw}"


def _is_read(name: str) -> bool:
    return name in INPUT_READS or name.startswith(("_read", "read_", "load"))


def _is_write(name: str) -> bool:
    return name in ("atomic_write", "write_json", "append_rows") or name.startswith(
        ("_write", "write_")
    )


def _holds_a_lock(fn: ast.AST) -> bool:
    return any(
        isinstance(node, ast.With)
        and any("lock" in ast.unparse(item.context_expr).lower() for item in node.items)
        for node in ast.walk(fn)
    )


def test_a_file_read_and_written_back_is_updated_under_a_lock():
    """Read-modify-write of one file (``record()``'s sidecar, a results table) holds a lock
    beside the file: without one, two processes each write back what they read and one's
    records are lost (``record()`` from two processes once kept half of 300)."""
    unlocked, seen = [], set()
    for module, tree in _modules():
        for q, fn in _functions(tree, module):
            reads, writes = set(), set()
            for call in _own_calls(fn):
                name = _name(call)[1]
                if name and call.args:
                    target = ast.unparse(call.args[0])
                    if _is_read(name):
                        reads.add(target)
                    if _is_write(name):
                        writes.add(target)
            if reads & writes:
                seen.add(q)
                if not _holds_a_lock(fn) and not _marked(fn, "unlocked_update"):
                    unlocked.append(f"{q} ({', '.join(sorted(reads & writes))})")
    assert not unlocked, f"reads and writes back a file without a lock: {unlocked}"
    stale = sorted(_marked_functions("unlocked_update") - seen)
    assert not stale, f"marked unlocked_update but read and write back no file: {stale}"


# --- environment variables ---------------------------------------------------------------------
ENV_READS = {("os", "getenv"), ("environ", "get"), ("os", "environ")}


def _env_reads(fn: ast.AST) -> list[str]:
    out = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr in ("get", "getenv"):
                v = f.value
                if (isinstance(v, ast.Attribute) and v.attr == "environ") or (
                    isinstance(v, ast.Name) and v.id == "os" and f.attr == "getenv"
                ):
                    out.append(ast.unparse(node)[:60])
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            v = node.value
            if isinstance(v, ast.Attribute) and v.attr == "environ":
                out.append(ast.unparse(node)[:60])
        elif (
            isinstance(node, ast.Compare)
            and any(isinstance(o, ast.In) for o in node.ops)
            and any(isinstance(c, ast.Attribute) and c.attr == "environ" for c in node.comparators)
        ):
            out.append(ast.unparse(node)[:60])
    return out


def test_environment_variables_are_read_only_through_inputs_env():
    problems, seen = [], set()
    for module, tree in _modules():
        for qualname, fn in _functions(tree, module):
            reads = _env_reads(fn)
            if reads:
                seen.add(qualname)
            if reads and not _marked(fn, "environ_read"):
                problems.append(f"{qualname}: {reads}")
    assert not problems, "read os.environ directly (use zeus_nb.inputs.env.env): " + "; ".join(
        problems
    )
    stale = sorted(_marked_functions("environ_read") - seen)
    assert not stale, f"marked environ_read but read no variable: {stale}"


def test_every_variable_named_in_the_package_is_declared():
    from zeus_nb.inputs.env import VARIABLES

    named = set()
    for path in PACKAGE.rglob("*.py"):
        # a name ending in "_" is a prefix (Zeus's ZEUS_PFO_<FIELD>), read where environ_read says
        named |= set(re.findall(r"[\"'](ZEUS_[A-Z_]*[A-Z])[\"']", path.read_text()))
    assert named - set(VARIABLES) == set()


# --- command-line options ----------------------------------------------------------------------
def entry_parsers() -> dict[str, object]:
    from zeus_nb.cli import build_parser
    from zeus_nb.monitor.cli import parser as monitor_parser
    from zeus_nb.train.config import parser as train_parser
    from zeus_nb.train.pipeline.trainer import parser as pipeline_parser

    parsers = {"zeus-nb": build_parser(), "python -m zeus_nb.monitor": monitor_parser()}
    for mode in ("single", "dp", "fsdp"):
        parsers[f"zeus_nb.train.{mode}"] = train_parser(mode)
    parsers["zeus_nb.train.pipeline"] = pipeline_parser()
    return parsers


def leaves(parser, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], object]]:
    """Every sub-command that runs something (a parser without sub-parsers), by its path."""
    import argparse

    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
        return
    for name, child in subs[0].choices.items():
        yield from leaves(child, (*path, name))


def all_leaves() -> dict[tuple[str, ...], object]:
    return {
        p: leaf for prog, parser in entry_parsers().items() for p, leaf in leaves(parser, (prog,))
    }


def option_kind(action) -> str:
    """How an option is guarded: flag, choices, typed (an inputs.args type), or unguarded."""
    import argparse

    from zeus_nb.inputs.args import ArgType

    if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
        return "help"
    if action.nargs == 0:
        return "flag"
    if action.choices is not None:
        return "choices"
    if isinstance(action.type, ArgType):
        return "typed"
    return "unguarded"


def test_every_option_of_every_command_is_typed_a_flag_or_a_choice():
    unguarded = [
        f"{' '.join(path)} {a.option_strings or a.dest}"
        for path, leaf in all_leaves().items()
        for a in leaf._actions
        if option_kind(a) == "unguarded"
    ]
    assert not unguarded, f"options without a checked type (zeus_nb.inputs.args): {unguarded}"


def test_every_switch_that_turns_something_off_refuses_the_options_it_makes_idle():
    """``--no-power-limit-optimizer --max-slowdown 1.2`` once ran without a word about the
    ignored knob: a ``--no-...`` flag is the condition of the options it makes idle
    (``only_with``, whose requirement names it), or is listed as independent with why."""
    from zeus_nb.inputs.args import INDEPENDENT_SWITCHES

    loose = []
    for path, leaf in all_leaves().items():
        conditions = leaf.get_default("_conditions") or []
        for action in leaf._actions:
            switch = next((o for o in action.option_strings if o.startswith("--no-")), None)
            if switch is None or switch in INDEPENDENT_SWITCHES:
                continue
            if not any(switch in c.requirement for c in conditions):
                loose.append(f"{' '.join(path)} {switch}")
    assert not loose, f"switches whose idle options are not refused (only_with): {loose}"


def test_options_that_set_a_notebook_parameter_refuse_it_given_with_p(capsys):
    """``--smoke`` once overrode ``-p smoke false``: a command that passes -p parameters and
    has options setting one refuses the two together, naming both."""
    from test_reliability_battery import COMMANDS, argv_for

    from zeus_nb.cli import main
    from zeus_nb.runner.notebooks import PARAMETER_OPTIONS

    tried = 0
    for path, leaf in all_leaves().items():
        opts = {o for a in leaf._actions for o in a.option_strings}
        if "-p" not in opts:
            continue
        for option, name in PARAMETER_OPTIONS.items():
            if option not in opts:
                continue
            value = "false" if option == "--smoke" else "sim"
            extra = [option] if option == "--smoke" else [option, "nvml"]
            argv = [*path[1:], *argv_for(path, COMMANDS[path]), *extra, "-p", name, value]
            code = main(argv)
            err = capsys.readouterr().err
            assert code == 2 and option in err and f"-p {name}" in err, (path, option, err)
            tried += 1
    assert tried >= 3  # sweep --smoke; course grade/verify/slides --smoke and --backend


def test_every_command_has_a_battery_case():
    from test_reliability_battery import COMMANDS

    assert set(all_leaves()) == set(COMMANDS)


@pytest.mark.parametrize("path", sorted(all_leaves()), ids=" ".join)
def test_every_typed_option_refuses_its_bad_values_as_one_line(path, capsys):
    """Empty strings, NaN, fractions, out-of-range values: a usage error naming the option
    (exit status 2, one line), never a silent default."""
    from test_reliability_battery import COMMANDS, argv_for

    leaf = all_leaves()[path]
    tried = 0
    for action in leaf._actions:
        if option_kind(action) != "typed":
            continue
        for bad in action.type.bad:
            argv = argv_for(path, COMMANDS[path], action, bad)
            with pytest.raises(SystemExit) as exit_:
                leaf.parse_args(argv)
            err = capsys.readouterr().err.strip()
            assert exit_.value.code == 2, (argv, err)
            assert len(err.splitlines()) == 1 and "error:" in err, (argv, err)
            tried += 1
    assert tried or not any(option_kind(a) == "typed" for a in leaf._actions)
