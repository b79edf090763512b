#!/usr/bin/env bash
# Install zeus-nb from this source tree into a virtual environment.
#
# Usage: docker/install.sh VENV_DIR [PIP ARGS...]
#
# The Dockerfile runs this script, and the test suite runs it into a fresh virtual environment, so
# the image and the tests install the package the same way. The environment lives outside the
# working folder so that bind-mounting a checkout over the working folder does not hide it.
# Extra arguments go to `pip install` (for example an extra index for CUDA builds of torch, or
# `--no-index --no-build-isolation` for an offline install).
set -euo pipefail

if [[ $# -lt 1 || "$1" == -* ]]; then
    echo "usage: $0 VENV_DIR [PIP ARGS...]" >&2
    exit 2
fi
venv="$1"
shift

src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-python3}"

if [[ ! -x "$venv/bin/python" ]]; then
    "$python" -m venv "$venv"
fi

# The Hugging Face extra is included (notebook 02 demonstrates the Trainer callback), and the
# cluster extra, so the image can also run as a Dask worker and reach a PostgreSQL store.
extras="${ZEUS_NB_EXTRAS:-hf,cluster}"
"$venv/bin/python" -m pip install --no-cache-dir "$@" "$src[$extras]"

# Fail the build here, not at the first notebook, when the install is broken.
"$venv/bin/zeus-nb" --version
"$venv/bin/python" -c "import zeus_nb, torch, papermill, jupyterlab, ipywidgets"
if [[ ",$extras," == *",cluster,"* ]]; then
    "$venv/bin/python" -c "import distributed, dask_jobqueue, sqlalchemy, psycopg"
fi
