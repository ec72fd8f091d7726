# LaneATT-R18 along the recipe that made the shipped lite (laneatt_lite_v2; issue 35 item 3, "r18 on a lent GPU if
# one comes"), for the next session that is lent a GPU: the shipped synth-v1 R18 continued on wide-v1 roads, then
# on mix-v1, then briefly on the first renderer's roads again, each stage started from the last one's card with
# --init; only the last stage calibrates its threshold and scores held-out, stress and the judge (the rule: ship
# if judge F1 > 0.844 and held-out >= 0.95). Written 2026-11-29 after runs/r18_wide_device.sh (which ran out of
# device time); not yet run on a GPU. Smoke-tested on the CPU with ARCH=lite and stages of seconds:
#   DEVICE=cpu ARCH=lite INIT=lanes/weights/laneatt_lite_v2.json M1=0.05 M2=0.05 M3=0.05 EV=4 JU=2 CAL=4 WORKERS=1 \
#     BATCH=2 bash runs/r18_roads_device.sh
set -u
. runs/device_tree.sh  # orinkit imported from the tree (the device machine has torch but not orinkit)
PY=${PY:-python3}; OUTDIR=${OUT:-/tmp/r18roads-out}; WORK=${WORK:-/tmp/r18roads}; mkdir -p "$OUTDIR" "$WORK"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | head -2; nproc
ARCH=${ARCH:-r18}; INIT=${INIT:-lanes/weights/laneatt_r18_synth.json}; DEV=${DEVICE:-cuda}
common="--arch $ARCH --device $DEV --batch ${BATCH:-16} --workers ${WORKERS:-14} --eval-minutes 0 --log-seconds 20"
quiet="--eval-images 0 --judge-images 0 --calibration-images 0"
stage() {  # name data lr minutes init [options...]: one run; its card is the next stage's --init
  name=$1 data=$2 lr=$3 minutes=$4 init=$5; shift 5
  echo "== $(date -u +%T) stage $name: --data $data --lr $lr --minutes $minutes from $init"
  $PY -m orinkit.lanes.train $common --data "$data" --lr "$lr" --minutes "$minutes" --warmup-steps 100 \
    --init "$init" --name "laneatt_${ARCH}_$name" --out "$WORK/$name" "$@" 2>&1 | tee -a "$OUTDIR/train.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] && [ -f "$WORK/$name/laneatt_${ARCH}_$name.json" ]
}
stage wide wide-v1 5e-4 "${M1:-5.0}" "$INIT" $quiet \
  && stage mix mix-v1 3e-4 "${M2:-2.0}" "$WORK/wide/laneatt_${ARCH}_wide.json" $quiet \
  && stage v2 synth-v1 1e-4 "${M3:-0.7}" "$WORK/mix/laneatt_${ARCH}_mix.json" --seed 1 \
       --eval-images "${EV:-500}" --judge-images "${JU:-150}" --calibration-images "${CAL:-200}"
echo "== $(date -u +%T) rc $?"
# every stage's card, the last stage's weights only (what comes back from the device is limited)
cp "$WORK"/*/laneatt_"${ARCH}"_*.json "$WORK"/v2/laneatt_"${ARCH}"_v2.*.pt "$OUTDIR/" 2>/dev/null; ls -la "$OUTDIR"
