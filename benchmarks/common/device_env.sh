# Sourced first by every command on the GPU machine (through the device tool): installs the wheels that
# machine lacks (brought by ../shared/device/wheels.sh into .whl/) and puts the project on the path.
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1 || { echo "wheel install failed"; exit 3; }
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
