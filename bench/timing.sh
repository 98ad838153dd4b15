# Sourced by the bench scripts: how a command is timed.

# best_of COMMAND...: the shortest wall time of $RUNS runs in seconds and that run's peak RSS in
# KiB, or "error" with the failing run's stderr on stderr. Output goes to /dev/null.
best_of() {
  local best="" rss="" time_file err_file
  time_file=$(mktemp) err_file=$(mktemp)
  for _ in $(seq "$RUNS"); do
    if ! /usr/bin/time -f '%e %M' -o "$time_file" "$@" >/dev/null 2>"$err_file"; then
      echo "$* failed:" >&2
      cat "$err_file" >&2
      rm -f "$time_file" "$err_file"
      echo "error"
      return
    fi
    local elapsed kib
    read -r elapsed kib <"$time_file"
    if [ -z "$best" ] || awk -v a="$elapsed" -v b="$best" 'BEGIN { exit !(a < b) }'; then
      best=$elapsed rss=$kib
    fi
  done
  rm -f "$time_file" "$err_file"
  echo "$best $rss"
}
