# Sourced by scripts/setup-engine.sh and scripts/setup-llama-server.sh (not a setup step itself).
# `... | build_progress NAME`: reads a CMake/ninja build's output ("[done/total] ..." per object)
# and prints one line every 10 objects (or at most a minute apart) with the count, the time so
# far and the time left at the rate so far: on a loaded machine a build takes far longer than
# its idle estimate, and this says how much longer honestly.
build_progress() {
  local name=$1 start=$SECONDS last=0 line done_ total spent left
  while IFS= read -r line; do
    [[ "$line" =~ \[([0-9]+)/([0-9]+)\] ]] || continue
    done_=${BASH_REMATCH[1]} total=${BASH_REMATCH[2]} spent=$((SECONDS - start))
    if ((done_ % 10 == 0 || done_ == total || spent - last >= 60)); then
      last=$spent
      left=$(((total - done_) * spent / (done_ > 0 ? done_ : 1)))
      echo "  $name: $done_/$total objects, $((spent / 60)) min so far, about $((left / 60 + 1)) min left at this rate (load $(cut -d' ' -f1 /proc/loadavg))"
    fi
  done
}
