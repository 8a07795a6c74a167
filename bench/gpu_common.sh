# gpu_common.sh — the skeleton the one-call GPU scripts (run_ce_gpu.sh, run_optim_gpu.sh,
# run_grad_adopt_gpu.sh, run_fewer_launches_gpu.sh) share; sourced, not run.
#
# A script sets OUT (its log folder) and ROUNDS, sources this file, then calls: gpu_machine (the
# machine header into $OUT/machine.txt, printed too), gpu_build TARGET... (a Release build in b/,
# stopping the script on failure) and gpu_need_corpus (the training corpus D the build copies).
# With TRAIN (set here: `vram train`'s arguments), gpu_speed_rounds VAR V... trains 30 steps ROUNDS
# times for each value V of the environment variable VAR in turns (logs speed_V_ROUND.log) and
# gpu_profile VAR V runs 6 profiled steps (profile_V.log). For the table: gpu_ms V (the median
# step of each round), gpu_peak V (the peak allocated of the last round) and gpu_row LOG KERNEL
# (a profile row's launches and milliseconds a step).

D=b/data/kjv.txt
# GPT-2 124M, B=8, T=1024, bf16 with kept weights, AdamW: the run every script times
TRAIN=(train --device cuda:0 --model gpt2 --data $D --batch 8 --lr 3e-4 --precision bf16 --lowp-weights keep)

gpu_machine() {
  { date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc; git log --oneline -1; } \
    > "$OUT/machine.txt" 2>&1
  cat "$OUT/machine.txt"
}

gpu_build() { # TARGET...
  cmake -S . -B b -DCMAKE_BUILD_TYPE=Release > "$OUT/build.log" 2>&1 &&
    cmake --build b -j "$(nproc)" --target "$@" >> "$OUT/build.log" 2>&1 \
    || { echo "BUILD FAILED"; tail -30 "$OUT/build.log"; exit 1; }
}

gpu_need_corpus() {
  [ -s $D ] || { echo "no corpus at $D (the build copies data/kjv.txt.gz there)"; exit 1; }
}

gpu_speed_rounds() { # VAR VALUE...
  local var=$1 r v
  shift
  for ((r = 1; r <= ROUNDS; r++)); do
    for v in "$@"; do
      env "$var=$v" timeout 120 b/vram "${TRAIN[@]}" --steps 30 > "$OUT/speed_${v}_$r.log" 2>&1
      echo "$var=$v round $r rc=$?: $(grep -E '^summary' "$OUT/speed_${v}_$r.log")"
    done
  done
}

gpu_profile() { # VAR VALUE; returns the run's status
  env "$1=$2" VRAM_CUDA_PROFILE=1 timeout 120 b/vram "${TRAIN[@]}" --steps 6 > "$OUT/profile_$2.log" 2>&1
}

gpu_ms() { # VALUE
  cat "$OUT"/speed_$1_*.log 2>/dev/null | sed -n 's/^summary: median step \([0-9.]*\) ms.*/\1/p' | paste -sd' '
}

gpu_peak() { # VALUE
  grep -h '^summary' "$OUT"/speed_$1_*.log 2>/dev/null | tail -1 | sed -n 's/.*peak allocated \([0-9.]* MiB\).*/\1/p'
}

# a profile row's launches and total ms, per step (6 steps)
gpu_row() { # LOG KERNEL
  awk -v k="$2" 'index($0, k) { n = split($0, f, " "); for (i = 1; i <= n; i++) if (f[i] ~ /^[0-9]+$/) {
    printf "%.0f launches, %.3f ms", f[i] / 6, f[i + 1] / 6; exit } }' "$1"
}
