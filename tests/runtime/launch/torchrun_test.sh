#!/usr/bin/env bash
# The README's torchrun command, as written, on one machine standing in for two: two torchrun
# agents (--nnodes 2, --node_rank 0 and 1, c10d rendezvous, --no_python) each start one
# `parlab train` rank, and the job ends on the same final state hash as a local 2-process run.
# Each agent says it is a host of its own (PARLAB_HOST_ID), so the ranks meet over Gloo as on two
# machines. `--redirects 2 --tee 2` as in the README: Debian 12's torchrun (PyTorch 1.13 on
# Python 3.11) fails at its default `--redirects 0`. torchrun comes with PyTorch (Debian:
# python3-torch); skips (exit 77) without it.
#   torchrun_test.sh PARLAB_BIN MODEL_TOML
set -u
bin="$1" model="$2"
skip() { echo "SKIP: $*"; exit 77; }
command -v torchrun >/dev/null || skip "torchrun not found (it comes with PyTorch: apt-get install python3-torch)"
torchrun --help 2>&1 | grep -q -- '--no_python' || skip "this torchrun has no --no_python"
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT

args=(train --model "$model" --plan gbs=8,mb=4 --steps 4 --seed 3 --timeout 30 --checkpoint-every 0)
hash_of() { grep -h '"type":"final"' "$1" | sed 's/.*"combined_xxh3_64":"\([0-9a-f]*\)".*/\1/' | head -1; }

"$bin" "${args[@]}" --nproc 2 --run-dir "$work/ref" > "$work/ref.log" 2>&1 || { cat "$work/ref.log"; exit 1; }
want="$(hash_of "$work/ref/rank-0.jsonl")"

# A free port for the rendezvous endpoint (the README's node0:29400).
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
export PARLAB_STORE_TOKEN="$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
agent() {  # agent NODE_RANK HOST_ID
  PARLAB_HOST_ID="$2" timeout 120 torchrun --nnodes 2 --nproc_per_node 1 --node_rank "$1" --rdzv_backend c10d \
    --rdzv_endpoint "127.0.0.1:$port" --rdzv_id "parlab-$$" --redirects 2 --tee 2 --no_python \
    "$bin" "${args[@]}" --run-dir "$work/two" > "$work/node$1.log" 2>&1
}
agent 1 host-b &
n1=$!
agent 0 host-a
s0=$?
wait "$n1"; s1=$?
if [ "$s0" != 0 ] || [ "$s1" != 0 ]; then
  echo "FAIL: torchrun agents exited $s0 and $s1"
  for f in "$work"/node*.log; do echo "--- $f"; tail -40 "$f"; done
  exit 1
fi
got="$(hash_of "$work/two/rank-0.jsonl")"
grep -q '"comms":{"world":"gloo"}' "$work/two/rank-0.jsonl" || { echo "FAIL: the two nodes did not meet over Gloo"; exit 1; }
grep -h 'Launch' "$work/node0.log" | head -1
echo "final state hash: local reference $want, torchrun on two nodes $got"
[ -n "$want" ] && [ "$got" = "$want" ] || { echo "FAIL: final state hashes differ"; exit 1; }
echo PASS
