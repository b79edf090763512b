"""Results of a lent-GPU script: each printed as one JSON object as it comes, and all of them
kept in the file named by ``sys.argv[1]``, rewritten each time (a run stopped by its time limit
keeps what it had measured)."""

import json
import sys

_results: dict = {}


def emit(key: str, value) -> None:
    _results[key] = value
    print(json.dumps({key: value}), flush=True)
    with open(sys.argv[1], "w") as f:
        json.dump(_results, f, indent=1)
