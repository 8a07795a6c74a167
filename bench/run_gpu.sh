#!/usr/bin/env bash
# run_gpu.sh — everything issue 3 measures on a GPU machine, in one go, logs under $OUT (or ./gpu-out).
#   bench/run_gpu.sh [tests] [latency] [latrounds] [floor] [workloads] [ab] [graphs] [limits] [history]   (default: tests latency workloads)
# Builds vram (Release, into b/), runs the CTest `gpu` label and the PyTorch plug-in test, the
# allocator latency microbenchmarks (vram pages/segments; PyTorch native, expandable segments,
# cudaMallocAsync and raw cudaMalloc through bench_torch_alloc.cpp, built here with g++ against
# the installed torch), the four real workloads (or WORKLOADS=a,b,...) under native (twice), expandable and vram,
# (latrounds) the latency benchmark with vram, PyTorch native and optionally an older vram source
# tree (BASE=dir) in turns, ROUNDS times on one pinned core (bench/latency_rounds.py), (ab) one
# workload's step time with the allocators in turns (bench/ab_rounds.py), and (graphs) what a CUDA
# graph's memory goes through under native, vram and vram without its graph pools
# (bench/graphs_probe.py), and (limits) GPT-2 sampling under a limit on reserved memory a few
# percent above its peak requested (CAPS factors of REQ bytes), as on a GPU just large enough,
# under native, expandable segments, vram and vram without chunk_headroom, and (history) what the
# memory history's Python stacks cost a training step under vram and native (bench/history_cost.py).
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
what=${*:-tests latency workloads}
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; uname -r; nproc;
  lscpu | grep -E 'Model name|MHz' || true;
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'; } > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
cmake -S . -B b -DCMAKE_BUILD_TYPE=Release > "$OUT/build.log" 2>&1 && cmake --build b -j "$(nproc)" >> "$OUT/build.log" 2>&1 \
  || { echo "BUILD FAILED"; tail -30 "$OUT/build.log"; exit 1; }
export VRAM_TORCH_LIBRARY=$PWD/b/libvram_torch.so
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
# workload_run NAME ARGS...: one bench/torch_workloads.py process (pinned to $PIN when set),
# results in $OUT/NAME.json, its output in $OUT/NAME.log
workload_run() {
  local name=$1; shift
  PYTHONUNBUFFERED=1 timeout "${WL_TIMEOUT:-200}" ${PIN:+taskset -c "$PIN"} python3 bench/torch_workloads.py "$@" \
    --out "$OUT/$name.json" > "$OUT/$name.log" 2>&1
}
if [[ $what == *tests* ]]; then
  (cd b && ctest --output-on-failure -j 4 -E '^gpu_' ) > "$OUT/tests.log" 2>&1; echo "cpu tests rc=$?"; tail -3 "$OUT/tests.log"
  (cd b && ctest --output-on-failure -L gpu -V) > "$OUT/gpu_tests.log" 2>&1; echo "gpu tests rc=$?"
  grep -E "passed|failed|FAIL|SKIP|tests passed|Test +#" "$OUT/gpu_tests.log" | tail -40
fi
if [[ $what == *latency* || $what == *latrounds* || $what == *floor* ]]; then
  L=$OUT/latency.log; : > "$L"
  TORCH_DIR=$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))')
  CUDART_DIR=$(python3 -c 'import nvidia.cuda_runtime as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)
  g++ -O2 -std=c++17 bench/bench_torch_alloc.cpp -o b/bench_torch_alloc -I"$TORCH_DIR/include" \
      -I/usr/local/cuda/include -L"$TORCH_DIR/lib" -Wl,--no-as-needed -ltorch_cuda -ltorch_cpu -Wl,--as-needed -lc10_cuda -lc10 -Wl,-rpath,"$TORCH_DIR/lib" \
      ${CUDART_DIR:+-L"$CUDART_DIR" -Wl,-rpath,"$CUDART_DIR"} -l:libcudart.so.13 > "$OUT/torch_bench_build.log" 2>&1 \
    || g++ -O2 -std=c++17 bench/bench_torch_alloc.cpp -o b/bench_torch_alloc -I"$TORCH_DIR/include" \
      -I/usr/local/cuda/include -L"$TORCH_DIR/lib" -Wl,--no-as-needed -ltorch_cuda -ltorch_cpu -Wl,--as-needed -lc10_cuda -lc10 -Wl,-rpath,"$TORCH_DIR/lib" \
      -L/usr/local/cuda/lib64 -lcudart >> "$OUT/torch_bench_build.log" 2>&1 || echo "torch bench build failed" | tee -a "$L"
fi
if [[ $what == *latency* ]]; then
  { echo "## vram, pages model"; ./b/bench/bench_alloc_latency cuda:0
    echo "## vram, segments model"; VRAM_ALLOC_CONF=expandable_segments:False ./b/bench/bench_alloc_latency cuda:0
    echo "## PyTorch native"; ./b/bench_torch_alloc
    echo "## PyTorch expandable_segments"; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True ./b/bench_torch_alloc
    echo "## cudaMallocAsync"; PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync ./b/bench_torch_alloc
    echo "## cudaMalloc + cudaFree"; ./b/bench_torch_alloc cudamalloc
    echo "## page map/unmap costs"; ./b/bench/bench_cuda_pages cuda:0; } >> "$L" 2>&1
  cat "$L"
fi
if [[ $what == *latrounds* ]]; then
  # vram (this tree), BASE (another source tree, e.g. `git archive` of an older commit) and PyTorch
  # native in turns, one pinned core, one process each per round
  kinds="vram native"
  if [[ -n ${BASE:-} ]]; then
    cmake -S "$BASE" -B ob -DCMAKE_BUILD_TYPE=Release > "$OUT/base_build.log" 2>&1 &&
      cmake --build ob -j "$(nproc)" --target bench_alloc_latency >> "$OUT/base_build.log" 2>&1 &&
      kinds="vram base native" || echo "BASE build failed (see base_build.log)"
  fi
  for r in $(seq 1 "${ROUNDS:-3}"); do
    for k in $kinds; do
      case $k in
        vram) cmd=(./b/bench/bench_alloc_latency cuda:0) ;;
        base) cmd=(./ob/bench/bench_alloc_latency cuda:0) ;;
        native) cmd=(./b/bench_torch_alloc) ;;
      esac
      taskset -c "${PIN:-3}" "${cmd[@]}" > "$OUT/lat_r${r}_$k.log" 2>&1; echo "latency round $r $k rc=$?"
    done
  done
  python3 bench/latency_rounds.py "$OUT"/lat_r*.log | tee "$OUT/latency_rounds.md"
fi
if [[ $what == *floor* ]]; then
  for r in $(seq 1 "${ROUNDS:-3}"); do
    taskset -c "${PIN:-3}" ./b/bench/bench_random_floor cuda:0 --runs 5 > "$OUT/floor_r$r.log" 2>&1; echo "floor round $r rc=$?"
    taskset -c "${PIN:-3}" ./b/bench_torch_alloc > "$OUT/floor_r${r}_native.log" 2>&1; echo "native round $r rc=$?"
    for d in cuda:0 cudasim; do
      taskset -c "${PIN:-3}" ./b/bench/bench_random_split $d > "$OUT/split_r${r}_${d%%:*}.log" 2>&1; echo "split $d round $r rc=$?"
    done
    for sz in small large; do # one pool's requests at a time
      taskset -c "${PIN:-3}" ./b/bench/bench_random_floor cuda:0 --runs 5 --sizes $sz > "$OUT/floor_r${r}_$sz.log" 2>&1; echo "floor $sz round $r rc=$?"
    done
  done
  cell() { awk -F'|' -v row="$1" '$2 ~ "^ " row " " {print $3+0}' "$2"; }
  ratio() { awk -v a="$1" -v b="$2" 'BEGIN{if (b > 0) printf "%.3f", a / b}'; }
  { echo "| round | vram ns/op | floor ns/op | size classes ns/op | harness ns/op | native ns/op | vram / native | floor / native | size classes / native | split cuda: all, asked nothing, memory calls/run | split cudasim: same |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|"
    for r in $(seq 1 "${ROUNDS:-3}"); do
      v=$(cell vram "$OUT/floor_r$r.log"); f=$(cell floor "$OUT/floor_r$r.log"); h=$(cell harness "$OUT/floor_r$r.log")
      c=$(cell "size classes" "$OUT/floor_r$r.log")
      n=$(awk '/^random warm:/{print $3+0}' "$OUT/floor_r${r}_native.log")
      s=""; for d in cuda cudasim; do
        s="$s | $(awk -F'|' '$2 ~ /^ all /{a=$4+0} $2 ~ /^ nothing /{n=$4+0} /device calls:/{t=$0; sub(/.*calls: /,"",t); split(t,w," "); m=w[1]} END{print a", "n", "m}' "$OUT/split_r${r}_$d.log")"
      done
      echo "| $r | $v | $f | $c | $h | $n | $(ratio "$v" "$n") | $(ratio "$f" "$n") | $(ratio "$c" "$n")$s |"
    done
    echo; echo "| round | sizes | vram ns/op | floor ns/op | harness ns/op | vram / floor, harness excluded |"
    echo "|---|---|---|---|---|---|"
    for r in $(seq 1 "${ROUNDS:-3}"); do for sz in all small large; do
      log="$OUT/floor_r${r}_$sz.log"; [[ $sz == all ]] && log="$OUT/floor_r$r.log"
      echo "| $r | $sz | $(cell vram "$log") | $(cell floor "$log") | $(cell harness "$log") | $(awk '/^less the harness:/{print $NF}' "$log") |"
    done; done; } | tee "$OUT/floor_rounds.md"
fi
if [[ $what == *workloads* ]]; then
  for k in ${KINDS:-native vram expandable native2}; do
    workload_run "wl_$k" --alloc "$k" --steps "${STEPS:-8}" ${WORKLOADS:+--workloads "$WORKLOADS"}; echo "workloads $k rc=$?"; grep -E "Error|error" "$OUT/wl_$k.log" | tail -3
  done
  python3 bench/torch_workloads.py --report "$OUT"/wl_*.json | tee "$OUT/workloads.md"
fi
if [[ $what == *ab* ]]; then
  # step time of one workload, allocators in turns (bench/ab_rounds.py says why), pinned cores
  for r in $(seq 1 "${ROUNDS:-4}"); do
    for k in ${AB_KINDS:-native vram}; do
      PIN=${PIN:-2-5} workload_run "ab_r${r}_$k" --alloc "$k" --steps "${STEPS:-18}" \
        --workloads "${AB_WORKLOAD:-gpt2_generate}"; echo "ab round $r $k rc=$?"
    done
  done
  python3 bench/ab_rounds.py --workload "${AB_WORKLOAD:-gpt2_generate}" "$OUT"/ab_r*.json | tee "$OUT/ab.md"
fi
if [[ $what == *graphs* ]]; then
  for k in native vram vram-unwrapped; do
    timeout 300 python3 bench/graphs_probe.py "$k" 2>&1 | grep ' | '
  done | tee "$OUT/graphs_probe.txt"
fi
if [[ $what == *limits* ]]; then
  REQ=${REQ:-1032757592} # gpt2_generate's peak requested bytes, 3 calls (the same under every allocator; run 40)
  for f in ${CAPS:-1.06 1.10}; do
    cap=$(python3 -c "print(int($REQ * $f))")
    for k in ${LIMIT_KINDS:-native expandable vram vram:chunk_headroom:0}; do
      workload_run "lim_${f}_${k//[:,]/_}" --alloc "$k" --steps 9 --workloads gpt2_generate --cap-bytes "$cap"
      echo "limit $f $k rc=$?"
    done
  done
  python3 - "$OUT" <<'PY' | tee "$OUT/limits.md"
import glob, json, os, sys
runs = [r for f in sorted(glob.glob(os.path.join(sys.argv[1], "lim_*.json"))) for r in json.load(open(f))["results"]]
ref = max([r["peak_requested"] for r in runs if not r["oom"]] or [1])  # the same program under every allocator
print("peak requested (largest of the runs that finished): %d bytes\n" % ref)
print("| limit / peak requested | allocator | result | peak reserved / requested | mean call s | device calls per call |")
print("|---|---|---|---|---|---|")
for r in runs:
    res = "OOM in call %d" % (r["oom_step"] + 1) if r["oom"] else "ran %d calls" % len(r["losses"])
    print("| %.3f | %s | %s | %.3f | %.3f | %s |" % (r["cap_bytes"] / ref, r["allocator"], res,
          r["reserved_over_requested"] or 0, r["step_time_s"] or 0, r["device_calls_per_step"]))
PY
fi
if [[ $what == *history* ]]; then
  # the memory history's Python stacks: step time off / on, vram and native in turns
  for r in $(seq 1 "${ROUNDS:-2}"); do
    for k in vram native; do
      timeout 200 python3 bench/history_cost.py --alloc "$k" --steps "${STEPS:-60}" --out "$OUT/history_r${r}_$k.json" \
        > "$OUT/history_r${r}_$k.log" 2>&1; echo "history round $r $k rc=$?"; cat "$OUT/history_r${r}_$k.log"
    done
  done
fi
# everything back as one file (the tool returns at most 8)
tar -C "$OUT" -czf /tmp/gpu-out.tgz . && rm -rf "${OUT:?}"/* && mv /tmp/gpu-out.tgz "$OUT/gpu-out.tgz"
