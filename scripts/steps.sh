# Steps of a long script, timed (sourced by scripts/test.sh): `step NAME` ends the previous step
# with "== PREVIOUS: took N s" and starts NAME with "== NAME (at T s)"; `milestone NAME` notes
# the wall and CPU time (this shell's children: every command run so far) spent up to now; when
# the script exits, however it exits, the last step's time, the total and each milestone are said
# (the exit code is kept).
started=$SECONDS
current="" current_at=$SECONDS
end_step() {
  [ -n "$current" ] || return 0
  echo "== $current: took $((SECONDS - current_at)) s${1:-}"
  current=""
}
step() {
  end_step
  current="$1" current_at=$SECONDS
  echo "== $1 (at $((SECONDS - started)) s)"
}
milestones=()
children_cpu() {  # CPU seconds of this shell's finished children (/proc: cutime + cstime)
  local stat
  read -r -a stat <"/proc/$$/stat"
  awk -v t="$((stat[15] + stat[16]))" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.1f", t / hz }'
}
milestone() {
  milestones+=("== $1: $((SECONDS - started)) s wall, $(children_cpu) s CPU")
}
say_times() {
  end_step " (total $((SECONDS - started)) s)"
  local m
  for m in "${milestones[@]}"; do echo "$m"; done
}
trap say_times EXIT
