# Sourced by the benchmarks that race factbuoy against Ansible (run.sh, setup.sh): checks for
# hyperfine, builds the release binary into $factbuoy, makes the ansible-core venv into $venv
# and a scratch directory $work removed on exit. Expects to be sourced from the repository root.
command -v hyperfine >/dev/null || { echo "hyperfine is needed: apt-get install hyperfine" >&2; exit 2; }

echo "building factbuoy (release)..." >&2
cargo build --release --locked -p factbuoy >&2
target_dir="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
factbuoy="$target_dir/release/factbuoy"
venv="$(tests/ansible/venv.sh)"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
