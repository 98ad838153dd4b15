# Sourced by bench/fleet.sh and bench/history.sh once $factbuoy is built: makes (or finds)
# $CACHE/template, the extracted bundle of one real local run of this machine
# (factbuoy run --plugin host-facts --plugin setup), whose facts the generators vary per node.
if [ ! -e "$CACHE/template/meta/run.json" ]; then
  echo "collecting this machine's facts for the template..." >&2
  rm -rf "$CACHE/template" "$CACHE/template-run"
  mkdir -p "$CACHE/template-run"
  FACTBUOY_STATE_DIR="$CACHE/template-run/state" \
    "$factbuoy" run --plugin host-facts --plugin setup --out "$CACHE/template-run" >/dev/null
  mkdir -p "$CACHE/template.partial"
  tar -xzf "$CACHE"/template-run/*.tar.gz -C "$CACHE/template.partial"
  mv "$CACHE/template.partial" "$CACHE/template"
  rm -rf "$CACHE/template-run"
fi
