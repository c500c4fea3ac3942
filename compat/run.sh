#!/usr/bin/env bash
# `make compat`: aiobootstrap beside the engines' released code (compat/engines.txt), in environments of their
# own, kept between runs outside the checkout (a fresh clone on the same machine finds them):
#   ${XDG_CACHE_HOME:-~/.cache}/aiobootstrap/compat-KEY/sglang       SGLang, its imports (requirements.txt),
#                                                                     aiobootstrap and the test tools
#   ${XDG_CACHE_HOME:-~/.cache}/aiobootstrap/compat-KEY/vllm-LAYER   vLLM and its imports (requirements-vllm.txt)
#                                                                     alone, layered over the first by a .pth line
# KEY hashes SGLang's pin, requirements.txt and the Python version; LAYER hashes vLLM's pin and
# requirements-vllm.txt: another pin is another environment (or only another layer), built on first use.
# aiobootstrap is built and installed anew on every run, not editable: the engines find its plugins through
# its installed entry points. compat/tests/test_vllm_*.py run with the layer's Python, the rest with the
# first's (SGLang imports vLLM where it finds one). Arguments go to both pytest runs (e.g. -x, -k NAME).
#   bash compat/run.sh path|layer   prints the first environment's folder, or the layer's (building what is
#                                   missing), and runs nothing
set -euo pipefail
cd "$(dirname "$0")"
compat=$PWD
root=$(dirname "$compat")
python=${COMPAT_PYTHON:-python3.11}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/aiobootstrap

# One pin of engines.txt by its name (the only place an engine's version is written).
pin() { grep -E "^$1==" engines.txt; }
digest() { sha256sum | cut -c1-12; }

env=$cache/compat-$(cat <(pin sglang) requirements.txt <("$python" --version) | digest)
layer=$env/vllm-$(cat <(pin vllm) requirements-vllm.txt | digest)
mkdir -p "$cache"

purelib() { "$1/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))'; }

build() {
    rm -rf "$env"
    echo "compat: building $env (once per pin; about 7 GB; pip reports the engines' unmet dependencies:" \
        "they are installed without them on purpose)" >&2
    "$python" -m venv "$env/sglang"
    "$env/sglang/bin/python" -m pip install -q -r requirements.txt
    "$env/sglang/bin/python" -m pip install -q --no-deps "$(pin sglang)"
    touch "$env/.complete"
}

# vLLM's layer: a venv whose site-packages end with the first one's (a .pth line), so that vLLM's tests see
# both while SGLang's, run from the first, never find vLLM. pip leaves the first's packages alone.
build_layer() {
    rm -rf "$layer" "$env"/vllm-*
    echo "compat: building $layer" >&2
    "$python" -m venv "$layer"
    purelib "$env/sglang" >"$(purelib "$layer")/aiobootstrap-compat-base.pth"
    "$layer/bin/python" -m pip install -q --no-deps "$(pin vllm)"
    "$layer/bin/python" -m pip install -q -r requirements-vllm.txt
    touch "$layer/.complete"
}

# Concurrent runs (several checkouts on one machine) build once, one at a time.
exec 9>"$env.lock"
flock 9
[[ -e $env/.complete ]] || build
[[ -e $layer/.complete ]] || build_layer
# Environments of other pins unused for a week go (each is several GB).
touch "$env/.complete"
find "$cache" -maxdepth 2 -name .complete -mtime +7 -path "$cache/compat-*" -printf '%h\n' | xargs -r rm -rf
case ${1:-} in
path) echo "$env" && exit 0 ;;
layer) echo "$layer" && exit 0 ;;
esac
"$env/sglang/bin/python" -m pip install -q --no-build-isolation --no-deps --force-reinstall "$root"
flock -u 9

# From compat/ (not the checkout's root), so that neither pytest nor a `python -m aiobootstrap` subprocess
# imports the checkout's aiobootstrap in place of the installed one. SGLang's tests and vLLM's run at once
# (most of their time is engine processes importing torch, one at a time in each run), each into a file
# printed whole when both are done; a run still going after 20 minutes is stopped (a hang fails, in CI too).
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
shopt -s nullglob
vllm_tests=(tests/test_vllm_*.py)
timeout 1200 "$env/sglang/bin/python" -m pytest tests --ignore-glob='tests/test_vllm_*' "$@" >"$out/sglang" 2>&1 &
sglang=$!
if ((${#vllm_tests[@]})); then
    timeout 1200 "$layer/bin/python" -m pytest "${vllm_tests[@]}" "$@" >"$out/vllm" 2>&1 &
    vllm=$!
fi
status=0
wait $sglang || status=$?
echo "compat: SGLang's tests (compat/tests but test_vllm_*.py, in $env/sglang)"
cat "$out/sglang"
if ((${#vllm_tests[@]})); then
    wait "$vllm" || status=$?
    echo "compat: vLLM's tests (compat/tests/test_vllm_*.py, in $layer)"
    cat "$out/vllm"
fi
exit $status
