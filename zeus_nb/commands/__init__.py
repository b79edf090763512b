"""One module per ``zeus-nb`` sub-command, each with ``register(subparsers)``.

Handlers receive the parsed ``argparse.Namespace`` and return an exit code.
"""
