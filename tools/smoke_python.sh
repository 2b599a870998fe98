#!/usr/bin/env bash
# A smoke run of acp_trio on another Python (make test-pythons): the public
# modules import, the demo runs, and the core's tests pass (tests/jsonrpc and
# tests/connection, Hypothesis's dev profile), in a virtualenv of its own
# (.venv-pyX.Y, kept between runs) with the remote and fast extras and the
# test runner.
# The full suite runs on the Python of .venv (make test).
#
#   tools/smoke_python.sh 3.13
#   tools/smoke_python.sh 3.13 --prepare   # only make the virtualenv
#
# A Python the machine does not have is reported and skipped (exit 0), so a
# machine with fewer Pythons still runs the rest; pyenv's versions are found
# when its shim is not on the selected version.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$1
prepare_only=${2:-}
venv=.venv-py$version

find_python() {
    local candidate prefix
    candidate=$(command -v "python$version" || true)
    if [ -n "$candidate" ] && "$candidate" -c 'import sys' >/dev/null 2>&1; then
        echo "$candidate"
        return
    fi
    if command -v pyenv >/dev/null 2>&1; then
        prefix=$(pyenv versions --bare 2>/dev/null | grep -E "^${version//./\\.}\.[0-9]+$" | sort -V | tail -n 1)
        if [ -n "$prefix" ] && [ -x "$(pyenv root)/versions/$prefix/bin/python$version" ]; then
            echo "$(pyenv root)/versions/$prefix/bin/python$version"
            return
        fi
    fi
}

python=$(find_python)
if [ -z "$python" ]; then
    echo "smoke: Python $version not found on this machine: skipped"
    exit 0
fi

if [ ! -f "$venv/.installed" ] || [ pyproject.toml -nt "$venv/.installed" ] \
    || [ "$0" -nt "$venv/.installed" ]; then
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    # The package with its remote and fast (orjson) extras, and what tests/jsonrpc and
    # tests/connection need to run (the rest of the test extra is for the
    # full suite: interop peers, type checking, benchmarks' charts).
    "$venv/bin/python" -m pip install --quiet -e '.[remote,fast]' \
        'pytest>=8' 'pytest-trio>=0.8' 'pytest-timeout>=2.3' 'pytest-xdist>=3.6' 'hypothesis>=6.100'
    touch "$venv/.installed"
fi

if [ "$prepare_only" = "--prepare" ]; then
    exit 0
fi

echo "smoke: $("$venv/bin/python" --version)"
"$venv/bin/python" -c "
import acp_trio, acp_trio.lowlevel, acp_trio.v2, acp_trio.remote, acp_trio.proxy
import acp_trio.contrib, acp_trio.testing
print('smoke: imports acp_trio', acp_trio.__version__)
"
"$venv/bin/python" examples/cancel_demo.py >/dev/null
echo "smoke: the demo ran"
HYPOTHESIS_PROFILE=dev "$venv/bin/python" -m pytest -q -p no:cacheprovider \
    -n "${PYTEST_WORKERS:-auto}" tests/jsonrpc tests/connection
