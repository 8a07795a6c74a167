#!/usr/bin/env bash
# run 165b: the large-pool cuts on the H200 host: this tree and base165 (git archive of 9a8bc36,
# before them) in turns on one pinned core: the random workload by pool (bench_random_floor) and
# the latency benchmark with PyTorch native (bench/run_gpu.sh latrounds)
set -u
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
t0=$(date +%s)
mkdir -p "$OUT/lat"
OUT=$OUT/lat ROUNDS=${ROUNDS:-4} BASE=base165 bench/run_gpu.sh latrounds > "$OUT/latrounds.log" 2>&1; echo "latrounds rc=$? $(( $(date +%s) - t0 )) s"
tar -xzf "$OUT/lat/gpu-out.tgz" -C "$OUT/lat" && rm "$OUT/lat/gpu-out.tgz" # run_gpu.sh packs its folder
cmake --build ob -j "$(nproc)" --target bench_random_floor >> "$OUT/base_build.log" 2>&1 || echo "base floor build failed"
for r in $(seq 1 "${FROUNDS:-4}"); do
  for k in new base; do
    d=b; [[ $k == base ]] && d=ob
    for sz in all large; do
      taskset -c 3 ./$d/bench/bench_random_floor cuda:0 --runs 5 --sizes $sz > "$OUT/fl_r${r}_${k}_$sz.log" 2>&1 || echo "floor $r $k $sz failed"
    done
  done
done
echo "floor done $(( $(date +%s) - t0 )) s"
cat "$OUT/lat/latency_rounds.md"
{ echo "| round | build | sizes | vram ns/op | floor ns/op | size classes ns/op | harness ns/op | vram / floor, harness excluded | native ns/op (latency round, all sizes) | vram / native | size classes / native |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for f in "$OUT"/fl_r*.log; do
  n=$(basename "$f" .log); IFS=_ read -r _ r k sz <<< "$n"
  cell() { awk -F'|' -v row="$1" '$2 ~ "^ " row " " {print $3+0}' "$f"; }
  nat=""; [[ $sz == all ]] && nat=$(awk '/^random warm:/{print $3+0}' "$OUT/lat/lat_${r}_native.log" 2>/dev/null) # native ran all sizes
  v=$(cell vram); c=$(cell "size classes")
  echo "| ${r#r} | $k | $sz | $v | $(cell floor) | $c | $(cell harness) | $(awk '/^less the harness:/{print $NF}' "$f") | $nat | $(awk -v a="$v" -v b="$nat" 'BEGIN{if (a == "" || b == "") printf "-"; else printf "%.3f", a / b}') | $(awk -v a="$c" -v b="$nat" 'BEGIN{if (a == "" || b == "") printf "-"; else printf "%.3f", a / b}') |"
done; } | tee "$OUT/floor_table.md"
