#!/usr/bin/env bash
# CI: the package as a user gets it. A plain (non-editable) install of the project into a fresh virtual
# environment, then, in an empty folder outside the checkout:
#   - `tuner list` shows the built-ins (their spaces and kernels ride inside the wheel);
#   - `tuner best` answers from the recordings the wheel carries (read-only package data);
#   - `tuner init saxpy` makes ./workloads/saxpy, which `tuner list` then shows, and no file of the installed
#     package changes;
#   - nvcc compiles the scaffold's kernel with its first configuration's #defines (sm_90).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --upgrade pip
# builds the wheel (hatchling), installs it; --no-compile: pip byte-compiling every dependency's modules took 35 of
# the install's 60 s here, and Python compiles those it imports as it imports them (the checksums leave .pyc out)
"$work/venv/bin/python" -m pip install -q --no-compile "$repo"
tuner="$work/venv/bin/tuner"
py="$work/venv/bin/python"

site=$(cd "$work" && "$py" -c "import pathlib, tuner; print(pathlib.Path(tuner.__file__).parent)")  # not from here: '' is on sys.path
case "$site" in "$repo"*) echo "FATAL: tuner was imported from the checkout, not the installed package" >&2; exit 1;; esac
checksums() { (cd "$site" && find . -type f -not -name '*.pyc' -print0 | sort -z | xargs -0 sha256sum); }
before=$(checksums)

mkdir "$work/project" && cd "$work/project"
"$tuner" list --json > list.json
"$py" - <<'PY'
import json
names = {d["workload"]: d for d in json.load(open("list.json"))}
missing = {"reduction", "gemm", "spmv", "floyd-warshall", "locvolcalib"} - set(names)
assert not missing, f"built-ins missing from `tuner list`: {missing}"
assert all(names[n]["origin"] == "built-in" for n in ("reduction", "gemm")), names["reduction"]
PY
"$tuner" best reduction --size seed --dtype float32 --gpu "NVIDIA H100 80GB HBM3" --json > best.json
"$py" -c "import json; a = json.load(open('best.json')); assert a['fallback'] == 'exact' and a['config'], a"

"$tuner" init saxpy
test -f workloads/saxpy/space.yaml
"$tuner" list --json > list.json
"$py" - <<'PY'
import json, pathlib
names = {d["workload"]: d for d in json.load(open("list.json"))}
assert "saxpy" in names, sorted(names)
assert pathlib.Path(names["saxpy"]["origin"]).resolve() == pathlib.Path("workloads/saxpy").resolve(), names["saxpy"]
PY
if command -v nvcc >/dev/null; then
    "$py" - <<'PY'
import subprocess, tempfile, pathlib
from tuner.measure import kt
from tuner.workloads import get_workload
space = get_workload("saxpy").space
config = dict(zip(space.params, kt.searchspace(space).list[0]))
with tempfile.TemporaryDirectory() as tmp:
    src = pathlib.Path(tmp) / "saxpy.cu"
    src.write_text(space.source_for(next(iter(space.dtypes)), config))
    subprocess.run(["nvcc", "-arch=sm_90", "-c", str(src), "-o", str(src.with_suffix(".o"))], check=True)
print("nvcc compiled the scaffold's kernel for", config)
PY
else
    echo "nvcc not found: the scaffold's kernel was not compiled" >&2
    exit 1
fi
test "$(checksums)" = "$before" || { echo "FATAL: files of the installed package changed" >&2; exit 1; }
echo "wheel test: passed"
