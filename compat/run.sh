#!/usr/bin/env bash
# `make compat`: aiobootstrap beside the engines' released code (compat/engines.txt), in an environment of
# its own, kept between runs outside the checkout (a fresh clone on the same machine finds it):
#   ${XDG_CACHE_HOME:-~/.cache}/aiobootstrap/compat-HASH/sglang  the engines' imports, SGLang, aiobootstrap
#   ${XDG_CACHE_HOME:-~/.cache}/aiobootstrap/compat-HASH/vllm    vLLM alone, layered over the first by a .pth
# HASH is that of engines.txt, requirements.txt and the Python version: another pin is another environment.
# aiobootstrap is built and installed anew (not editable: the engines find its plugins through its
# installed entry points) on every run. Arguments go to both pytest runs (e.g. -k, -x).
#   bash compat/run.sh path    prints the environment's folder (built if missing) and runs nothing
set -euo pipefail
cd "$(dirname "$0")"
compat=$PWD
root=$(dirname "$compat")
python=${COMPAT_PYTHON:-python3.11}
key=$(cat engines.txt requirements.txt <("$python" --version) | sha256sum | cut -c1-12)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/aiobootstrap
env=$cache/compat-$key
mkdir -p "$cache"

# One pin of engines.txt by its name (the only place a version is written).
pin() { grep -E "^$1==" engines.txt; }

build() {
    rm -rf "$env"
    echo "compat: building $env (once per pin; several GB)" >&2
    "$python" -m venv "$env/sglang"
    "$env/sglang/bin/pip" install -q -r requirements.txt
    "$env/sglang/bin/pip" install -q --no-deps "$(pin sglang)"
    # vLLM in a layer: its own venv whose site-packages end with the first one's (a .pth line), so vLLM's
    # tests see both and SGLang's, run from the first, never find vLLM.
    "$python" -m venv "$env/vllm"
    local base layer
    base=$("$env/sglang/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
    layer=$("$env/vllm/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
    echo "$base" >"$layer/aiobootstrap-compat-base.pth"
    "$env/vllm/bin/pip" install -q --no-deps "$(pin vllm)"
    touch "$env/.complete"
}

# Concurrent runs (several checkouts on one machine) build once, one at a time.
exec 9>"$env.lock"
flock 9
[[ -e $env/.complete ]] || build
if [[ ${1:-} == path ]]; then
    echo "$env"
    exit 0
fi
"$env/sglang/bin/pip" install -q --no-build-isolation --no-deps --force-reinstall "$root"
flock -u 9

# From compat/ (not the checkout's root), so that neither pytest nor a `python -m aiobootstrap` subprocess
# imports the checkout's aiobootstrap in place of the installed one.
status=0
"$env/sglang/bin/python" -m pytest tests --ignore-glob='tests/test_vllm_*' "$@" || status=$?
shopt -s nullglob
vllm_tests=(tests/test_vllm_*.py)
if ((${#vllm_tests[@]})); then
    "$env/vllm/bin/python" -m pytest "${vllm_tests[@]}" "$@" || status=$?
fi
exit $status
