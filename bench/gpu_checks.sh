#!/usr/bin/env bash
# The GPU checks of the register scan (issue 40) in one command, most important first, each under
# its own time limit, for a machine with a GPU and gpurisk's cuda extras installed:
#
#   bash bench/gpu_checks.sh OUTDIR
#
# 1. `pytest -m gpu` over the three test folders (the real data found as the tests find it);
# 2. the register bench at 20 M rows, 20-key pool, <= 3 keys: cuDF twice (the first with an empty
#    CuPy kernel cache, so it includes compiling the kernels; the second reads them from the cache)
#    and dask-cuda, every row of each checked against the first's; then <= 4 keys on cuDF;
# 3. the same at 100 M rows (<= 3 keys on cuDF and dask-cuda, <= 4 keys on cuDF).
#
# Limits in seconds (environment): PYTEST_S (150), SCAN20_S (150), SCAN100_S (420). Each step's
# output goes to OUTDIR (pytest.txt, scan20.txt, scan100.txt, and the benches' PNGs) and to the
# terminal. Without a usable GPU it says so and exits 0, having run nothing.
set -u
out=${1:?usage: bash bench/gpu_checks.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 2
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 2
export PYTHONUNBUFFERED=1
t0=$(date +%s)
say() { echo "[gpu_checks +$(( $(date +%s) - t0 )) s] $*"; }

if ! python3 -c "import cupy, cudf; cupy.cuda.runtime.getDeviceCount()" >/dev/null 2>&1; then
    say "no usable GPU here (CuPy and cuDF must import and see a device): nothing checked"
    exit 0
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null
python3 -c "import cudf, cupy, dask, pandas; print('cuDF', cudf.__version__, 'CuPy', cupy.__version__, 'Dask', dask.__version__, 'pandas', pandas.__version__)"
cache=$(mktemp -d)               # an empty kernel cache: the first scan's compile is measured
export CUPY_CACHE_DIR=$cache

say "pytest -m gpu (limit ${PYTEST_S:-150} s)"
timeout "${PYTEST_S:-150}" python3 -m pytest -m gpu -q -p no:cacheprovider -rs \
    tests plugins/gpurisk-classic/tests plugins/gpurisk-arx/tests 2>&1 | tee "$out/pytest.txt" | tail -25
say "register scan, 20 M rows (limit ${SCAN20_S:-150} s)"
timeout "${SCAN20_S:-150}" python3 bench/bench_register_scan.py --rows 20000000 --pool 20 \
    --max-size 3,4 --backends cudf,cudf,dask-cudf --backends-at 4=cudf --loop-combos 1 \
    --png "$out/scan20.png" 2>&1 | tee "$out/scan20.txt"
say "register scan, 100 M rows (limit ${SCAN100_S:-420} s)"
timeout "${SCAN100_S:-420}" python3 bench/bench_register_scan.py --rows 100000000 --pool 20 \
    --max-size 3,4 --backends cudf,dask-cudf --backends-at 4=cudf --loop-combos 1 \
    --png "$out/scan100.png" 2>&1 | tee "$out/scan100.txt"
say "done; CuPy compiled $(find "$cache" -type f | wc -l) kernel file(s) into an empty cache"
rm -rf "$cache"
