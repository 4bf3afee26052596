#!/usr/bin/env bash
# The GPU side of flash-mini's training, in stages that fit the device tool's limits
# (10 min a command, 64 MiB carried, files back <= 16 MiB each). Run from the repo root.
#   stage1: install the carried wheels, stash teacher part 1, smoke-test the trunk/MTP step speed
#   stage2: rebuild the teacher GGUF, generate chat data with it, train the trunk (CE + KL)
#   stage3: resume the trunk with the teacher, train the MTP block, pack the weights to $OUT
# State lives in /root/fm (kept while the machine stays warm between calls).
set -euo pipefail
export PYTHONUNBUFFERED=1
S=/root/fm; mkdir -p $S
if [ -d .gpu/w ] && [ ! -d $S/site/transformers ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $S/site .gpu/w/*.whl
fi
# gguf-py (transformers reads the teacher GGUF with it): gguf-0.19.0-py3-none-any.whl in .gpu/x
if [ -d .gpu/x ] && [ ! -d $S/site/gguf ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $S/site .gpu/x/*.whl
fi
export PYTHONPATH=$S/site
T=$S/teacher/SmolLM2-135M-Instruct.Q4_1.gguf
case "$1" in
stage1)
  mkdir -p $S/teacher && cp .gpu/a/teacher.part00 $S/teacher/
  nvidia-smi --query-gpu=name,memory.total --format=csv
  python3 -c "import torch,transformers;print(torch.__version__,transformers.__version__,torch.cuda.get_device_name())"
  python3 -c "import numpy as np;np.random.randint(0,49152,4_000_000).astype(np.uint16).tofile('/tmp/rand.u16')"
  python3 train/train.py trunk --data /tmp/rand.u16 --work /tmp/smoke --seconds 45 --total-steps 40 --batch 64 --log-every 5
  python3 train/train.py mtp --data /tmp/rand.u16 --work /tmp/smoke --seconds 25 --total-steps 15 --batch 32 --log-every 5
  ;;
stage2)
  cat $S/teacher/teacher.part00 .gpu/b/teacher.part01 .gpu/b/teacher.part02 > $T
  echo "$(cat .gpu/b/teacher.sha256)  $T" | sha256sum -c
  python3 train/train.py gen --teacher $T --tok $S/tok --out $S/chat.u16 --seconds ${GEN_S:-210} --batch ${GEN_B:-1024} 2>&1 | grep -v Converting
  python3 train/train.py trunk --data $S/chat.u16 --work $S/w --teacher $T --seconds ${TRUNK_S:-270} --total-steps ${STEPS:-3000} --batch 64 --log-every 25 2>&1 | grep -v Converting
  python3 train/train.py pack --work $S/w --out $OUT/pack
  cp $S/chat.u16 $S/w/trunk_hist.json $OUT/
  ;;
stage3)
  test -f $T
  python3 train/train.py trunk --data $S/chat.u16 --work $S/w --teacher $T --seconds ${TRUNK_S:-300} --total-steps ${STEPS:-3000} --batch 64 --log-every 25 2>&1 | grep -v Converting
  python3 train/train.py mtp --data $S/chat.u16 --work $S/w --seconds ${MTP_S:-150} --total-steps ${MTP_STEPS:-1500} --batch 32 --lr 1e-3 --log-every 25
  python3 train/train.py pack --work $S/w --out $OUT/pack
  cp $S/w/trunk_hist.json $S/w/mtp_hist.json $OUT/
  ;;
esac
# stage4 (stage3 trained the DeltaNet with transformers' default silu output gate, which
# llama.cpp's qwen4exp cannot run: it hard-codes sigmoid): distil the stage3 weights (teacher:
# silu gate) into the same weights with the sigmoid gate, then refit the MTP block on the new
# trunk. Carries .gpu/d/pack (stage3's pack, xz) and .gpu/d/chat_sub.u16 (600k teacher tokens).
if [ "$1" = stage4 ]; then
  mkdir -p $S/pack4
  python3 -c "import lzma,glob,os;[open('$S/pack4/'+os.path.basename(f)[:-3],'wb').write(lzma.open(f).read()) for f in glob.glob('.gpu/d/pack/*.xz')]"
  python3 train/train.py trunk --data .gpu/d/chat_sub.u16 --work $S/w4 --init-pack $S/pack4 --teacher-gate silu --seconds ${TRUNK_S:-150} --total-steps ${STEPS:-450} --lr 4e-4 --warmup 20 --kl-w 0.9 --batch 64 --log-every 25
  python3 train/train.py mtp --data .gpu/d/chat_sub.u16 --work $S/w4 --init-pack $S/pack4 --seconds ${MTP_S:-70} --total-steps ${MTP_STEPS:-600} --batch 32 --lr 3e-4 --warmup 20 --log-every 50
  python3 train/train.py pack --work $S/w4 --out $OUT/pack
  cp $S/w4/trunk_hist.json $OUT/trunk_hist_stage4.json; cp $S/w4/mtp_hist.json $OUT/mtp_hist_stage4.json
fi

# stage5: the MTP block refit on the shipped trunk (unchanged) with the KL to the trunk's own
# next-token distribution (train.py mtp --self-kl), so drafts match what greedy verification
# accepts. The working tree already fills most of a call's 64 MiB, so the stage4 pack travels
# over several calls: `stash` copies .gpu/{p,q0,q1,q2}/* (a pack file each) and .gpu/data/*.xz into
# $S; the last call checks the pack against .gpu/p5.sha256 and trains. Back: pack-mtp only.
if [ "$1" = stash ] || [ "$1" = stage5 ]; then
  mkdir -p $S/pack5
  for d in .gpu/p .gpu/q0 .gpu/q1 .gpu/q2; do if [ -d $d ]; then cp $d/* $S/pack5/; fi; done
  if [ -f .gpu/data/chat.u16.xz ]; then xz -dc .gpu/data/chat.u16.xz > $S/chat.u16; fi
  if [ -f .gpu/data/chat2.u16.xz ]; then xz -dc .gpu/data/chat2.u16.xz > $S/chat2.u16; fi
  ls -la $S/pack5 $S/chat.u16 2>/dev/null || true
fi
if [ "$1" = stage5 ]; then
  mkdir -p $S/w5
  (cd $S/pack5 && sha256sum -c) < .gpu/p5.sha256
  python3 train/train.py mtp --data $S/chat.u16 --work $S/w5 --init-pack $S/pack5 --self-kl ${SELF_KL:-0.8} \
      --seconds ${MTP_S:-330} --total-steps ${MTP_STEPS:-2400} --batch 32 --lr ${MTP_LR:-5e-4} --warmup 50 --log-every 100
  python3 train/train.py pack --work $S/w5 --out $OUT/pack --only-mtp
  cp $S/w5/mtp_hist.json $OUT/mtp_hist_stage5.json
fi

# gen2: more teacher data (fresh prompts and samples: seed 1) for a later trunk run. The teacher
# (98 MB) travels in 5 pieces, .gpu/t0 (with the wheel) .. .gpu/t4, one per call (`tstash`); the
# call that carries the last piece also reassembles it, checks .gpu/teacher.sha256 and generates.
# Back: chat2.u16 in 15 MiB parts ($OUT/chat2.u16.partNN; `cat` them in order).
if [ "$1" = tstash ] || [ "$1" = gen2 ]; then
  mkdir -p $S/teacher
  for d in .gpu/t0 .gpu/t1 .gpu/t2 .gpu/t3 .gpu/t4; do if [ -d $d ]; then cp $d/* $S/teacher/; fi; done
  ls -la $S/teacher
fi
if [ "$1" = gen2 ] || [ "$1" = stage6t ] || [ "$1" = stage7t ]; then
  cat $S/teacher/teacher.p0 $S/teacher/teacher.p1 $S/teacher/teacher.p2 $S/teacher/teacher.p3 \
      $S/teacher/teacher.p4 > $T
  echo "$(cat .gpu/teacher.sha256)  $T" | sha256sum -c
fi
if [ "$1" = gen2 ]; then
  python3 train/train.py gen --teacher $T --tok $S/tok --out $S/chat2.u16 --seed ${GEN_SEED:-1} \
      --seconds ${GEN_S:-420} --batch ${GEN_B:-1024} 2>&1 | grep -v Converting
  split -b 15728640 -d $S/chat2.u16 $OUT/chat2.u16.part
fi

# stage6: the trunk resumed from the stage5 pack with the teacher's KL on chat.u16 + chat2.u16
# (gen2's fresh 8.9 M tokens; each file's last 1% stays held out, so held_chat.txt stays unseen),
# then the MTP block refit on the new trunk as stage 5 does. Before it, in back-to-back calls:
# `stash` with the 5 pack files (.gpu/p .gpu/q0..q2, with .gpu/data holding chat.u16.xz and
# chat2.u16.xz) and `tstash` with the 5 teacher pieces. stage6t trains the trunk for TRUNK_S
# seconds and resumes where the last call stopped (one call cannot hold the whole run);
# stage6m fits the MTP block on it and packs. Both carry .gpu/p5.sha256 and .gpu/teacher.sha256.
# Back: the whole pack (4 files + the histories).
# stage7t/stage7m (next GPU session, not run yet): the same two steps from the stage 6 pack
# ($S/pack6, brought by `s6stash` + `align`'s carries as below, without running `align`) on
# conversation-aligned windows (train.py --align) with the teacher's KL, for the prompt gain.
case "$1" in
  stage6t|stage6m) INIT=$S/pack5; W=$S/w6; SUMS=.gpu/p5.sha256; ALIGN="" ;;
  stage7t|stage7m) INIT=$S/pack6; W=$S/w8; SUMS=.gpu/p6.sha256; ALIGN="--align" ;;
esac
if [ "$1" = stage6t ] || [ "$1" = stage7t ]; then
  (cd $INIT && sha256sum -c) < $SUMS
  mkdir -p $W
  python3 train/train.py trunk --data $S/chat.u16,$S/chat2.u16 --work $W --init-pack $INIT $ALIGN \
      --teacher $T --seconds ${TRUNK_S:-450} --total-steps ${STEPS:-3000} --lr ${LR:-6e-4} --warmup 50 \
      --batch 64 --log-every 50 2>&1 | grep -v Converting
fi
if [ "$1" = stage6m ] || [ "$1" = stage7m ]; then
  python3 train/train.py mtp --data $S/chat.u16,$S/chat2.u16 --work $W --init-pack $INIT \
      --self-kl 0.8 --seconds ${MTP_S:-150} --total-steps ${MTP_STEPS:-600} --batch 32 --lr 5e-4 \
      --warmup 20 --log-every 100
  python3 train/train.py pack --work $W --out $OUT/pack
  st=${1%m}; cp $W/trunk_hist.json $OUT/trunk_hist_$st.json; cp $W/mtp_hist.json $OUT/mtp_hist_$st.json
fi

# align (experiment, 2026-12-03, on the last 400 s of that session's GPU budget): the stage6
# trunk fine-tuned CE-only (the teacher did not fit the remaining budget) on conversation-aligned
# windows (train.py --align), to see whether the prompt gain (train/prompt_gain.py) moves.
# `s6stash` carries .gpu/w .gpu/x .gpu/data .gpu/s6a (pack-0, pack-1); `align` carries .gpu/s6b
# (pack-2, pack-3) and .gpu/p6.sha256. Back: the trunk's pack (no MTP block).
if [ "$1" = s6stash ] || [ "$1" = align ]; then
  mkdir -p $S/pack6
  for d in .gpu/s6a .gpu/s6b; do if [ -d $d ]; then cp $d/* $S/pack6/; fi; done
  [ -f $S/chat.u16 ] || xz -dc .gpu/data/chat.u16.xz > $S/chat.u16
  [ -f $S/chat2.u16 ] || xz -dc .gpu/data/chat2.u16.xz > $S/chat2.u16
fi
if [ "$1" = align ]; then
  (cd $S/pack6 && sha256sum -c) < .gpu/p6.sha256
  python3 train/train.py trunk --data $S/chat.u16,$S/chat2.u16 --work $S/w7 --init-pack $S/pack6 --align \
      --seconds ${TRUNK_S:-150} --total-steps ${STEPS:-500} --lr ${LR:-3e-4} --warmup 20 --batch 64 --log-every 50
  python3 train/train.py pack --work $S/w7 --out $OUT/pack
  cp $S/w7/trunk_hist.json $OUT/trunk_hist_align.json
fi
