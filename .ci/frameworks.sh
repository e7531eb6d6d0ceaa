#!/usr/bin/env bash
# Live framework tests: one venv per framework x instrumentation "family", because the
# instrumentations conflict with each other. This script
#   0. builds the project's wheel once (`pip wheel --no-deps .`, i.e. what `pip install .`
#      builds), into .venv-fw/dist;
# then, for each family,
#   1. (re)creates .venv-fw/<family> with $PYTHON (default python3; the pins were made on 3.11),
#   2. installs tests/frameworks/requirements-<family>.txt (a complete lock: every package,
#      pytest included, pinned with ==, so pip runs with --no-deps and no resolver), then the
#      project's wheel, then `pip check`s the result,
#   3. runs `python -m pytest tests/frameworks -q -p no:cacheprovider` in it, with
#      LOOPGUARD_FRAMEWORK_FAMILY=<family> so that a missing package of that family fails
#      instead of skipping.
# It prints one summary line per family and exits non-zero if any family failed.
# When $PYTHON's own pip can target another interpreter (pip >= 22.3, `pip --python`), the venvs
# are made --without-pip and that pip installs into them: ensurepip costs ~5 s of CPU per venv.
#
# Usage: .ci/frameworks.sh [family ...]        (default: every requirements-*.txt)
#   FW_JOBS=N       families run at once (default 3; 1 = one after another)
#   PYTHON=python3.11
# Logs: .venv-fw/<family>.log
set -uo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
FW_JOBS="${FW_JOBS:-3}"
PIP_OPTS=(-q --disable-pip-version-check)
INSTALL_OPTS=(--no-deps --no-compile)
ROOT=.venv-fw

if [ "$#" -gt 0 ]; then
  families=("$@")
else
  families=()
  for req in tests/frameworks/requirements-*.txt; do
    name="${req##*/requirements-}"
    families+=("${name%.txt}")
  done
fi
mkdir -p "$ROOT"
printf '*\n' >"$ROOT/.gitignore"  # keep the venvs and logs out of git

PYTHON="$("$PYTHON" -c 'import sys; print(sys.executable)')" || exit 1
host_pip=0
if "$PYTHON" -m pip --python "$PYTHON" --version >/dev/null 2>&1; then
  host_pip=1
fi

pip_in() {  # pip_in VENV ARGS...: run pip for the venv's interpreter
  local venv="$1"; shift
  if [ "$host_pip" = 1 ]; then
    "$PYTHON" -m pip --python "$venv/bin/python" "$@"
  else
    "$venv/bin/python" -m pip "$@"
  fi
}

run_family() {
  local family="$1" venv="$ROOT/$1" log="$ROOT/$1.log" result="$ROOT/$1.result"
  local req="tests/frameworks/requirements-$family.txt" start=$SECONDS stage="venv"
  local venv_opts=(--clear)
  [ "$host_pip" = 1 ] && venv_opts+=(--without-pip)
  rm -f "$result"
  {
    if [ ! -f "$req" ]; then
      echo "missing $req"; false
    fi &&
    "$PYTHON" -m venv "${venv_opts[@]}" "$venv" &&
    stage="install" && echo "[frameworks] install lock +$((SECONDS - start))s" &&
    pip_in "$venv" install "${PIP_OPTS[@]}" "${INSTALL_OPTS[@]}" -r "$req" &&
    echo "[frameworks] install project +$((SECONDS - start))s" &&
    pip_in "$venv" install "${PIP_OPTS[@]}" "${INSTALL_OPTS[@]}" "$WHEEL" &&
    pip_in "$venv" check "${PIP_OPTS[@]}" &&
    stage="tests" && echo "[frameworks] tests +$((SECONDS - start))s" &&
    LOOPGUARD_FRAMEWORK_FAMILY="$family" \
      "$venv/bin/python" -m pytest tests/frameworks -q -p no:cacheprovider
  } >"$log" 2>&1
  local rc=$?
  local tail
  tail="$(grep -E '^(=+ )?[0-9]+ (passed|failed|errors?|skipped|deselected)' "$log" | tail -n 1 | tr -d '=' | xargs)"
  if [ "$rc" -eq 0 ] && ! grep -qE '[0-9]+ passed' <<<"$tail"; then
    rc=1  # everything skipped: the family's packages are not really there
  fi
  if [ "$rc" -eq 0 ]; then
    echo "frameworks: $family PASS (${tail}) in $((SECONDS - start))s" >"$result"
  else
    echo "frameworks: $family FAIL at $stage (${tail:-see $log}) in $((SECONDS - start))s" \
      >"$result"
  fi
  return "$rc"
}

start=$SECONDS
rm -rf "$ROOT/dist"
if ! "$PYTHON" -m pip wheel "${PIP_OPTS[@]}" --no-deps . -w "$ROOT/dist" >"$ROOT/dist.log" 2>&1; then
  cat "$ROOT/dist.log"
  echo "frameworks: FAILED to build the project's wheel"
  exit 1
fi
WHEEL="$(ls "$ROOT"/dist/otel_loopguard-*.whl)"
echo "frameworks: built ${WHEEL##*/} in $((SECONDS - start))s"

running=0
for family in "${families[@]}"; do
  if [ "$running" -ge "$FW_JOBS" ]; then
    wait -n
    running=$((running - 1))
  fi
  run_family "$family" &
  running=$((running + 1))
done
wait

status=0
for family in "${families[@]}"; do
  if [ -f "$ROOT/$family.result" ]; then
    cat "$ROOT/$family.result"
  else
    echo "frameworks: $family FAIL (no result; see $ROOT/$family.log)"
  fi
  grep -q ' PASS ' "$ROOT/$family.result" 2>/dev/null || status=1
done
for family in "${families[@]}"; do
  if ! grep -q ' PASS ' "$ROOT/$family.result" 2>/dev/null; then
    echo "---- last lines of $ROOT/$family.log"
    grep -v '^WARNING: Location ' "$ROOT/$family.log" 2>/dev/null | tail -n 40
  fi
done
echo "frameworks: ${#families[@]} families in $((SECONDS - start))s, $([ "$status" = 0 ] && echo OK || echo FAILED)"
exit "$status"
