"""zeus-nb docs build"""

from __future__ import annotations

from pathlib import Path

from zeus_nb.docsite import build_site
from zeus_nb.inputs.args import nonempty
from zeus_nb.utils.boundary import needs_extra


def register(sub) -> None:
    p = sub.add_parser("docs", help="the tutorial site (executed notebooks, guides, API reference)")
    docs_sub = p.add_subparsers(dest="docs_command", required=True, metavar="ACTION")
    b = docs_sub.add_parser(
        "build",
        help="execute the notebooks (smoke mode, simulated GPU) and build the site offline",
        description=(
            "Build the tutorial site into DIR from a source checkout: the README, the guides "
            "in docs/, every notebook executed in smoke mode on the simulated GPU with its "
            "figures, and an API reference from the docstrings. Needs no network. Open "
            "DIR/index.html in a browser, or serve it on this machine: "
            "python -m http.server -d DIR --bind 127.0.0.1."
        ),
    )
    b.add_argument(
        "dir", nargs="?", type=nonempty("path"), default="site", help="output folder (./site)"
    )
    b.add_argument(
        "--no-execute", action="store_true", help="use the notebooks without outputs (fast)"
    )
    b.add_argument(
        "--keep-src",
        type=nonempty("path"),
        default=None,
        help="keep the assembled MkDocs sources here",
    )
    b.add_argument("--no-strict", action="store_true", help="let MkDocs warnings pass")
    b.add_argument(
        "--executed",
        type=nonempty("path"),
        default=None,
        metavar="DIR",
        help="show the executed student editions in DIR instead of executing the notebooks",
    )
    b.set_defaults(func=run_build)


def run_build(args) -> int:
    import logging

    with needs_extra("docs", "zeus-nb docs build"):
        import mkdocs.commands.build  # noqa: F401  (checked before anything is written)
        import mkdocs.config  # noqa: F401

    logging.getLogger("zeus_nb.docsite").setLevel(logging.INFO)
    if not logging.getLogger().handlers:
        logging.basicConfig(format="%(message)s")
    keep = Path(args.keep_src) if args.keep_src else None
    report = build_site(
        args.dir,
        execute=not args.no_execute,
        strict=not args.no_strict,
        keep_src=keep,
        executed=args.executed,
    )
    print(
        f"site in {report.site_dir}/: {len(report.notebooks)} notebooks, {len(report.guides)} "
        f"guides, {len(report.api_modules)} API pages; open {report.site_dir}/index.html"
    )
    return 0
