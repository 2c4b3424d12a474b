#!/usr/bin/env bash
# The GPU measurements the open issues wait for, as one prepared command for a lent device.
#
#   bash scripts/gpu_session.sh PART [PART ...]          # on the GPU machine, from the repository root
#   bash scripts/gpu_session.sh --smoke PART [PART ...]  # here, on the CPU: each part's tiny variant
#
# Parts, in the order they are worth running (each has its own time limit, so a slow one cannot eat the
# others' time; what a part measured before its limit stays written):
#   w4a8      issue 23 §1-2: W4A8 decode on a Qwen3-30B-A3B-shaped MoE   -> RESULTS_w4a8.md          (limit 440 s)
#   mxfp4     issue 23 §3:   MXFP4 quantize vs the device copy, torchao    -> RESULTS_mxfp4_gpu.md     (limit 120 s)
#   polestar  issue 31:      train the ~30M dLLM 5 min, decoder sweep      -> RESULTS_polestar_gpu.md  (limit 560 s)
#   pace      issue 32:      PACE ranker at ATSP-200, eval on ATSP-500     -> pace_atsp500.json        (limit 560 s)
# With 15 minutes of device time (a start costs 1-2 of them) one session fits "w4a8 mxfp4" in a first
# call and nothing large after it, or one of polestar / pace. Results and one log per part go to $OUT
# (at most 8 files come back), else to gpu_out/.
#
# Packages: the device image has torch, transformers, peft, scipy, scikit-learn, tqdm, botorch; `pace` also
# needs elkai (LKH-3). Fetch it here first, into .whl/ (ignored by git), and name .whl in the run's carry:
#   bash scripts/gpu_session.sh --fetch-wheels
set -uo pipefail

if [[ "${1:-}" == "--fetch-wheels" ]]; then
    grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
    exec python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d .whl "elkai==2.0.1"
fi

smoke=0
if [[ "${1:-}" == "--smoke" ]]; then smoke=1; shift; fi
if [[ $# -eq 0 ]]; then
    sed -n '2,/^set /p' "$0" | sed '$d'
    exit 2
fi
for part in "$@"; do
    case "$part" in w4a8|mxfp4|polestar|pace) ;; *) echo "unknown part '$part' (w4a8, mxfp4, polestar, pace)" >&2; exit 2 ;; esac
done

out="${OUT:-gpu_out}"
mkdir -p "$out"
py="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1
if ((!smoke)) && [[ -d .whl ]] && compgen -G ".whl/*.whl" > /dev/null; then  # wheels for the device's Python 3.12
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
fi
# the package from this checkout, not an installed copy
export PYTHONPATH="$PWD/src:${PYTHONPATH:-}"

{
    date -u
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null || echo "no nvidia-smi"
    "$py" -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.cuda.is_available())"
} 2>&1 | tee "$out/session.log"

status=0
run_part() {  # name, limit (s), command...
    local name=$1 limit=$2
    shift 2
    echo "== $name (limit ${limit} s): $*" | tee -a "$out/session.log"
    local t0=$SECONDS
    timeout --signal=INT --kill-after=20 "$limit" "$@" > "$out/$name.log" 2>&1
    local rc=$?
    echo "== $name: rc $rc after $((SECONDS - t0)) s" | tee -a "$out/session.log"
    tail -n 25 "$out/$name.log"
    [[ $rc -eq 0 ]] || status=1
}

for part in "$@"; do
    case "$part" in
    w4a8)
        if ((smoke)); then run_part w4a8 300 "$py" benchmarks/bench_w4a8_decode.py --tiny --out "$out/RESULTS_w4a8.md"
        else run_part w4a8 440 "$py" benchmarks/bench_w4a8_decode.py --out "$out/RESULTS_w4a8.md"; fi ;;
    mxfp4)
        if ((smoke)); then run_part mxfp4 300 "$py" benchmarks/bench_mxfp4.py --device cpu --size 1024 --repeats 2 --out "$out/RESULTS_mxfp4_gpu.md"
        else run_part mxfp4 120 "$py" benchmarks/bench_mxfp4.py --device cuda --out "$out/RESULTS_mxfp4_gpu.md"; fi ;;
    polestar)
        if ((smoke)); then run_part polestar 300 "$py" scripts/polestar_gpu.py --device cpu --minutes 0.2 --width 64 --layers 2 \
                --gen-length 32 --block-length 8 --prompts 8 --batch-decode 4 --out "$out/RESULTS_polestar_gpu.md"
        else run_part polestar 560 "$py" scripts/polestar_gpu.py --device cuda --out "$out/RESULTS_polestar_gpu.md"; fi ;;
    pace)
        if ((smoke)); then run_part pace 300 "$py" scripts/pace_gpu.py --device cpu --tiny --workers 2 --out "$out/pace_atsp500.json"
        else run_part pace 560 "$py" scripts/pace_gpu.py --device cuda --workers "$(nproc)" --max-minutes 8.5 --out "$out/pace_atsp500.json"; fi ;;
    esac
done
exit $status
