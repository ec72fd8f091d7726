# LaneATT-R18 on a lent GPU (issue 23 item 7), as the device tool ran it: orinkit imported from the tree through a
# namespace of links (the device machine has torch but not orinkit). Its output: runs/r18_train.log.
ns=/tmp/ns/orinkit; mkdir -p $ns
for d in core formats server jetson convert repo client systemd lanes cli ui fleet video; do ln -sfn "$PWD/$d" "$ns/$d"; done
export PYTHONPATH=/tmp/ns:$PYTHONPATH PYTHONUNBUFFERED=1
PY=${PY:-python3}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>&1 | head -2; nproc; df -h /dev/shm | tail -1
$PY -c "import torch, torchvision; print('torch', torch.__version__, torch.cuda.is_available())"
W=${WORKERS:-14}; MIN=${MINUTES:-6.5}; DEV=${DEVICE:-cuda}; EV=${EVAL:-500}
args="--arch r18 --device $DEV --batch ${BATCH:-16} --lr 1e-3 --minutes $MIN --eval-images $EV --eval-minutes 1.5 --log-seconds 20 --name laneatt_r18_synth"
$PY -m orinkit.lanes.train $args --workers $W --out /tmp/r18 2>&1 | tee $OUT/train.log
rc=${PIPESTATUS[0]}
if [ $rc -ne 0 ] && [ -f /tmp/r18/checkpoint.pt ]; then
  echo "== rc $rc: resuming with fewer drawing workers"
  $PY -m orinkit.lanes.train --resume --out /tmp/r18 --workers 4 2>&1 | tee -a $OUT/train.log
elif [ $rc -ne 0 ]; then
  echo "== rc $rc before any checkpoint: again with 4 workers"
  $PY -m orinkit.lanes.train $args --workers 4 --out /tmp/r18b 2>&1 | tee -a $OUT/train.log; cp /tmp/r18b/laneatt_r18_synth* $OUT/ 2>/dev/null
fi
cp /tmp/r18/laneatt_r18_synth* $OUT/ 2>/dev/null; ls -la $OUT
