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
    "$venv/bin/python" -m pip --version >/dev/null 2>&1 \
        || "$venv/bin/python" -m ensurepip --upgrade >/dev/null 2>&1 \
        || { rm -rf "$venv"; die "the new virtualenv has no pip and ensurepip failed: install python3-venv / python3-pip"; }
    # A current pip (PEP 517 builds, the `license` expression); a failure here shows in the install below.
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip \
        || echo "test.sh: warning: could not upgrade pip in $venv" >&2
fi
vpy="$venv/bin/python"

echo "test.sh: installing snowline[test] from $here" >&2
# Not editable: what is tested is what a user installs (the generated modules included). pip rebuilds and
# reinstalls a local directory every time, so the tests always see the current sources.
"$vpy" -m pip install --quiet --disable-pip-version-check "$here[test]" \
    || die "pip could not build or install $here (see above; PyPI must be reachable for grpcio-tools, grpcio, protobuf, pytest)"
# The build leaves these beside the sources (git-ignored); tidy up.
rm -rf "$here/build" "$here/src/snowline.egg-info"

cd "$here"
# Import the installed package, not src/ (which lacks the generated modules).
exec "$vpy" -m pytest -p no:cacheprovider "$@"
