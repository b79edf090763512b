#!/usr/bin/env bash
# The real-GPU figures of docs/real_gpus.md (and the README's real-GPU rows): run ON A MACHINE WITH
# AN NVIDIA GPU, from the checkout's root, with zeus-nb, torch and (for the side-by-side probe)
# zeus==0.16 importable:
#   bash benchmarks/real_gpu/run.sh
# Raw output goes to benchmarks/results/real-gpu-<UTC date>/ (OUT= overrides): log.txt, probe.json
# (zeus-nb beside Zeus 0.16: energy agreement, window cost), nvml.json (NVML read costs, update
# periods), guard.jsonl (every NVML setter the run attempted), tour.tgz and tourdeny.tgz (the
# executed notebooks; tourdeny: every setter refused, as on a GPU the user may not change).
#
# Every Python process loads benchmarks/real_gpu/guard first (PYTHONPATH): no NVML call can change
# the GPU's power limit, clocks or any other setting. ZNB_GUARD=shadow records each such call and
# makes it do nothing (reads of the power limit then return what was "set"); ZNB_GUARD=deny raises
# NO_PERMISSION, as in a container without SYS_ADMIN. nvidia-smi readings before and after show
# the settings unchanged. Steps are bounded; ONLY=doctor,probe,costs,train,deny,tour,tourdeny
# picks some. Wheels under .gpu/whl (../shared/gpu/prepare.sh fills it) are installed first when
# present, for a GPU image that lacks them.
set -u
ROOT=$(pwd)
[ -f pyproject.toml ] && [ -d zeus_nb ] || { echo "run from the zeus-nb checkout's root"; exit 2; }
OUT=${OUT:-$ROOT/benchmarks/results/real-gpu-$(date -u +%F)}; mkdir -p "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1
T0=$SECONDS
ONLY=${ONLY:-doctor,probe,costs,per_step,trace,train,deny,tour,tourdeny}
want() { [[ ",$ONLY," == *",$1,"* ]]; }
step() { echo; echo "== [$((SECONDS - T0)) s] $*"; }
Q=name,driver_version,power.limit,power.default_limit,power.min_limit,power.max_limit,clocks.max.sm,persistence_mode
smi() { nvidia-smi --query-gpu=$Q --format=csv,noheader 2>&1 || echo "no nvidia-smi"; }
T=$(cd "$(dirname "$0")" && pwd)
step "zeus-nb $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '(no git)'), $(date -u +%FT%TZ)"
step "GPU settings before"; smi | tee "$OUT/smi_before.txt"

SITE=""
if ls "$ROOT"/.gpu/whl/*.whl >/dev/null 2>&1; then
  step "install carried wheels"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$ROOT"/.gpu/whl/*.whl || exit 1
  SITE=:/tmp/site
fi
export PYTHONPATH=$T/guard:$ROOT$SITE ZNB_GUARD=shadow ZNB_GUARD_LOG=$OUT/guard.jsonl
export ZEUS_NB_STATE_DIR=/tmp/znstate MPLBACKEND=Agg PYTHONUNBUFFERED=1
python3 -c "import sitecustomize, pynvml, torch; assert pynvml._znb_guarded; print('guard on | torch', torch.__version__, '| cuda', torch.cuda.is_available())" || exit 1

want doctor && { step "zeus-nb doctor"; timeout 60 python3 -m zeus_nb doctor; echo "exit $?"; }
want probe && { step "probe: zeus-nb beside Zeus 0.16 on the same GPU (energy agreement, window cost)"
  timeout 150 python3 "$T/probe.py" "$OUT/probe.json"; echo "exit $?"; }
want costs && { step "NVML read costs and update periods"
  timeout 60 python3 "$T/nvml_costs.py" "$OUT/nvml.json"; echo "exit $?"; }
want per_step && { step "a window around each training step: what it adds (paired runs, beside Zeus 0.16)"
  timeout 160 python3 "$T/per_step.py" "$OUT/per_step.json" | tail -4; echo "exit ${PIPESTATUS[0]}"; }
want trace && { step "every NVML energy and power read of per-step windows, to replay on the CPU"
  timeout 80 python3 "$T/trace.py" "$OUT/trace.json"; echo "exit $?"; }
if want train || want deny; then
  python3 data_scripts/make_synthetic_imagenet.py /tmp/syn --classes 4 --train-per-class 400 \
    --val-per-class 16 --image-size 64 --layout-only >/dev/null
  TRAIN=(/tmp/syn/imagenet --gpu 0 --arch resnet18 --image-size 64 --batch-size 64 --warmup-steps 2
         --profile-steps 4 --pl-step 50 --workers 4 --no-progress --device cuda)
fi
want train && { step "python -m zeus_nb.train.single on the GPU (limit changes shadowed)"
  ZEUS_MAX_SLOWDOWN=1.1 timeout 150 python3 -m zeus_nb.train.single "${TRAIN[@]}" --epochs 4 \
    --results "$OUT/train_single.json" 2>&1 | tail -20; echo "exit ${PIPESTATUS[0]}"; }
want deny && { step "the same without permission to change the limit (no SYS_ADMIN)"
  ZNB_GUARD=deny timeout 90 python3 -m zeus_nb.train.single "${TRAIN[@]}" --epochs 1 \
    --results "$OUT/train_deny.json" 2>&1 | tail -6; echo "exit ${PIPESTATUS[0]}"; }
want tour && { step "zeus-nb tour on the GPU (backend auto = NVML)"
  timeout ${TOUR_S:-300} python3 -m zeus_nb tour -o /tmp/tour --timeout 150 2>&1 | tail -40; echo "exit ${PIPESTATUS[0]}"
  tar czf "$OUT/tour.tgz" -C /tmp tour 2>/dev/null; }
want tourdeny && { step "zeus-nb tour --smoke as a user who may not change the GPU (every setter refused)"
  ZNB_GUARD=deny timeout ${TOUR_DENY_S:-240} python3 -m zeus_nb tour --smoke -o /tmp/tourdeny --timeout 120 2>&1 | tail -30
  echo "exit ${PIPESTATUS[0]}"; tar czf "$OUT/tourdeny.tgz" -C /tmp tourdeny 2>/dev/null; }

step "GPU settings after"; smi | tee "$OUT/smi_after.txt"
if cmp -s "$OUT/smi_before.txt" "$OUT/smi_after.txt"; then echo "settings unchanged"; else echo "SETTINGS CHANGED"; diff "$OUT/smi_before.txt" "$OUT/smi_after.txt"; fi
echo "guarded NVML calls: $(wc -l < "$OUT/guard.jsonl" 2>/dev/null || echo 0)"
step "done: raw output in $OUT"
