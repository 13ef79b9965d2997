# Sourced by scripts/demo and scripts/test (from the repository root): make .venv hold what
# uv.lock pins, with uv, installing uv itself from PyPI when it is missing.
#
# pyproject.toml keeps the package's requirements as ranges; uv.lock pins the versions (and
# hashes) the dev and CI environments get, so two fresh clones install the same. Change a
# requirement, then run `uv lock` (scripts/test fails while uv.lock disagrees with pyproject.toml).

# The uv that wrote uv.lock. A uv on PATH is used when it is this version or newer; otherwise
# this one is installed with pip into the user's cache directory (no installer script, no root).
UAC_UV_VERSION="0.13.9"

# Sets UV to a uv command of at least UAC_UV_VERSION.
uac_find_uv() {
  local have dir tmp
  if have="$(uv --version 2>/dev/null)"; then
    have="${have#uv }"
    have="${have%% *}"
    if [ "$(printf '%s\n%s\n' "$UAC_UV_VERSION" "$have" | sort -V | head -n1)" = "$UAC_UV_VERSION" ]; then
      UV="uv"
      return
    fi
  fi
  if [ -n "${XDG_CACHE_HOME:-}" ] || [ -n "${HOME:-}" ]; then
    dir="${XDG_CACHE_HOME:-$HOME/.cache}/uac/uv-$UAC_UV_VERSION"
  else
    # No home: a directory of this run's own, never a shared /tmp path another user could plant
    dir="$(mktemp -d)/uv-$UAC_UV_VERSION"
  fi
  # A cached uv that does not answer as this version (a partial or damaged copy) is replaced.
  if [ -e "$dir" ] && [ "$("$dir/bin/uv" --version 2>/dev/null | cut -d' ' -f2)" != "$UAC_UV_VERSION" ]; then
    echo "replacing a broken uv in $dir" >&2
    rm -rf "$dir"
  fi
  if [ ! -x "$dir/bin/uv" ]; then
    echo "installing uv $UAC_UV_VERSION from PyPI into $dir" >&2
    mkdir -p "$(dirname "$dir")"
    tmp="$(mktemp -d "$dir.XXXXXX")" # then moved into place: an interrupted install is not used
    if ! PIP_ROOT_USER_ACTION=ignore python3 -m pip install -qq --disable-pip-version-check \
      --no-warn-script-location --target "$tmp" "uv==$UAC_UV_VERSION"; then
      rm -rf "$tmp"
      echo "error: could not install uv with python3's pip; install uv $UAC_UV_VERSION or newer" >&2
      echo "yourself (e.g. pip install uv) and run this again" >&2
      return 1
    fi
    mv -T "$tmp" "$dir" 2>/dev/null || rm -rf "$tmp" # another run got there first
  fi
  UV="$dir/bin/uv"
}

# uac_sync [uv sync options]: create .venv if needed, then install uv.lock's versions into it.
uac_sync() {
  uac_find_uv
  # The venv is python3's: uv must not download a Python of its own, nor sync another venv.
  export UV_PYTHON_DOWNLOADS=never
  unset UV_PROJECT_ENVIRONMENT
  if [ ! -x .venv/bin/python ]; then
    # --seed puts pip in .venv, so `.venv/bin/pip install ...` installs there (and not into
    # the system's Python) for whoever adds a package by hand; uv sync leaves it in place.
    "$UV" venv --quiet --clear --seed --python python3 .venv
  fi
  # --frozen: install uv.lock as it is, without resolving again (scripts/test checks it is current)
  "$UV" sync --quiet --frozen "$@"
}
