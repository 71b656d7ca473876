#!/usr/bin/env bash
# Build and test the snowline Python client from this checkout.
#
#   clients/python/test.sh [PYTEST ARGS...]
#
# Creates a virtualenv ($VENV, default clients/python/.venv), pip-installs the package with its `test` extra
# (the build generates the protobuf/gRPC modules from proto/snowline/v1/snowline.proto), and runs pytest.
# Needs python3 (>= 3.11, with its venv module) and access to PyPI. The cluster tests start real clusters
# with the snowline binary: $SNOWLINE_BIN, else target/{release,debug}/snowline, else `snowline` on PATH;
# without one they fail, unless SNOWLINE_ALLOW_SKIP=1 (then they are skipped).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${VENV:-$here/.venv}"
python="${PYTHON:-python3}"

die() {
    echo "test.sh: $*" >&2
    exit 2
}

command -v "$python" >/dev/null 2>&1 || die "no $python on PATH: install Python 3.11 or newer (e.g. apt-get install python3 python3-venv)"
"$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
    || die "$("$python" --version 2>&1) is too old: the client needs Python 3.11 or newer (tomllib); set PYTHON=python3.11"

if [ ! -x "$venv/bin/python" ]; then
    echo "test.sh: creating the virtualenv $venv" >&2
    if ! "$python" -m venv "$venv"; then
        rm -rf "$venv"
        die "'$python -m venv' failed: install the venv module (on Debian/Ubuntu: apt-get install python3-venv)"
    fi
fi
vpy="$venv/bin/python"
"$vpy" -m pip --version >/dev/null 2>&1 \
    || "$vpy" -m ensurepip --upgrade >/dev/null 2>&1 \
    || die "the virtualenv $venv has no pip and ensurepip failed: install python3-pip / python3-venv"

echo "test.sh: installing snowline[test] from $here" >&2
"$vpy" -m pip install --quiet --disable-pip-version-check --upgrade pip \
    || die "cannot upgrade pip in $venv (is PyPI reachable?)"
# Not editable: the installed package is what a user gets (generated modules included).
"$vpy" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$here" \
    && "$vpy" -m pip install --quiet --disable-pip-version-check "$here[test]" \
    || die "pip could not build or install $here (see above; PyPI must be reachable for grpcio-tools, grpcio, protobuf, pytest)"

cd "$here"
# Import the installed package, not src/ (which lacks the generated modules).
exec "$vpy" -m pytest -p no:cacheprovider "$@"
