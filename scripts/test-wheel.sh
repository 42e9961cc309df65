#!/usr/bin/env bash
# Installs the wheel in target/wheels/ into a fresh virtual environment, as a user would, on a
# PATH without cargo, and runs the Python package's tests (python/tests) against it.
#   scripts/test-wheel.sh [PYTEST ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"

wheels=(target/wheels/memsight-*.whl)
if [ ! -f "${wheels[0]}" ]; then
    echo "no wheel in target/wheels/: run scripts/build-wheel.sh first" >&2
    exit 2
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
# pytest runs the tests; dask and ray run the many-files example as their tasks; ruff checks the
# Python code (its settings are in pyproject.toml).
"$work/venv/bin/pip" install --quiet --disable-pip-version-check "${wheels[0]}" pytest dask ray ruff
"$work/venv/bin/ruff" check --quiet "$repo/python" "$repo/scripts/bench_python_api.py"
"$work/venv/bin/ruff" format --check --quiet "$repo/python" "$repo/scripts/bench_python_api.py"

# A user's machine: this environment and the system, no Rust toolchain.
user_path="$work/venv/bin:/usr/local/bin:/usr/bin:/bin"
if PATH="$user_path" command -v cargo >/dev/null; then
    echo "cargo is on the test PATH ($user_path): the wheel would not be tested as a user runs it" >&2
    exit 1
fi
cd "$work"   # not the repository: `import memsight` must find the installed package
PATH="$user_path" memsight --version
PATH="$user_path" python -c 'import memsight, sys; assert memsight.__file__.startswith(sys.prefix), memsight.__file__'
PATH="$user_path" python -m pytest -q -p no:cacheprovider "$@" "$repo/python/tests"
