# LaneATT-R18 on the wide road data (issue 35 item 3: "r18 on a lent GPU if one comes"), as the device tool ran it:
# fine-tuned from the shipped synth-v1 R18 weights on wide-v1 roads drawn by 14 processes, then scored on held-out,
# stress and judge-renderer roads by the run's own final evaluation. orinkit is imported from the tree through a
# namespace of links (the device machine has torch but not orinkit). Its output: runs/r18_wide_train.log.
# 2026-11-28: it ran 5.6 min at 354 images/s (held-out F1 0.907 on 100 wide-v1 roads after 86,848 images), then a
# drawing worker raised on one road (a camera that saw no road nearer than the seams' 30 m; fixed in
# lanes/synth_clutter.py, and a road the renderer fails to draw is now skipped and said) and the run ended with it;
# the fallback resume ran out of the command's time. The session's device time was spent; the weights were lost.
ns=/tmp/ns/orinkit; mkdir -p $ns
for d in core formats server jetson convert repo client systemd lanes cli ui fleet video detect tune; do
  [ -d "$PWD/$d" ] && ln -sfn "$PWD/$d" "$ns/$d"; done
export PYTHONPATH=/tmp/ns:$PYTHONPATH PYTHONUNBUFFERED=1
PY=${PY:-python3}; OUTDIR=${OUT:-/tmp/r18wide-out}; mkdir -p "$OUTDIR"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>&1 | head -2; nproc
$PY -c "import torch, torchvision, sklearn; print('torch', torch.__version__, torch.cuda.is_available())"
W=${WORKERS:-14}; MIN=${MINUTES:-6.0}; DEV=${DEVICE:-cuda}; EV=${EVAL:-500}; JU=${JUDGE:-300}
args="--arch r18 --init lanes/weights/laneatt_r18_synth.json --data wide-v1 --device $DEV --batch ${BATCH:-16}
      --lr 5e-4 --warmup-steps 100 --minutes $MIN --eval-images $EV --judge-images $JU --eval-minutes 2
      --log-seconds 20 --name laneatt_r18_wide"
$PY -m orinkit.lanes.train $args --workers $W --out /tmp/r18w 2>&1 | tee "$OUTDIR/train.log"
rc=${PIPESTATUS[0]}
if [ $rc -ne 0 ] && [ -f /tmp/r18w/checkpoint.pt ]; then
  echo "== rc $rc: resuming with fewer drawing workers"
  $PY -m orinkit.lanes.train --resume --out /tmp/r18w --workers 4 2>&1 | tee -a "$OUTDIR/train.log"
fi
cp /tmp/r18w/laneatt_r18_wide* "$OUTDIR/" 2>/dev/null; ls -la "$OUTDIR"
