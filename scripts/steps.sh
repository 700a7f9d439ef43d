# Steps of a long script, timed (sourced by scripts/test.sh): `step NAME` ends the previous step
# with "== PREVIOUS: took N s" and starts NAME with "== NAME (at T s)"; when the script exits,
# however it exits, the last step's time and the total are said (the exit code is kept).
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
trap 'end_step " (total $((SECONDS - started)) s)"' EXIT
