#!/usr/bin/env bash
# Beyond one machine: two ranks in two network namespaces joined by a veth pair (torchrun
# variables, MASTER_ADDR on the veth, no GLOO_SOCKET_IFNAME) train to the same final state hash
# as a local 2-process run. The host name resolves to loopback in the namespaces (as it does in
# containers), so this holds only when each rank picks the interface that routes to MASTER_ADDR.
# The namespaces share this host's /dev/shm, so --comm auto would pick shared memory: each rank
# says it is on a host of its own (PARLAB_HOST_ID), as on two machines, and they meet over Gloo.
# Needs root and `ip netns`; skips (exit 77) saying why otherwise.
#   netns_test.sh PARLAB_BIN MODEL_TOML
set -u
bin="$1" model="$2"
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root to create network namespaces"
command -v ip >/dev/null || skip "needs the ip command (iproute2)"
tag="pl$$"
a="${tag}a" b="${tag}b"
work="$(mktemp -d)"
cleanup() { ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
ip netns add "$a" 2>/dev/null && ip netns add "$b" 2>/dev/null || skip "cannot create network namespaces here"
ip link add "${tag}x" type veth peer name "${tag}y" 2>/dev/null || skip "cannot create a veth pair here"
ip link set "${tag}x" netns "$a" && ip link set "${tag}y" netns "$b" || skip "cannot move the veth ends"
ip -n "$a" addr add 10.213.0.1/24 dev "${tag}x" && ip -n "$b" addr add 10.213.0.2/24 dev "${tag}y" || exit 1
for n in "$a" "$b"; do ip -n "$n" link set lo up; done
ip -n "$a" link set "${tag}x" up && ip -n "$b" link set "${tag}y" up || exit 1
ip netns exec "$a" getent hosts "$(hostname)" | grep -q '^127\.' ||
  echo "note: the host name does not resolve to loopback here; the test still checks the run"

args=(train --model "$model" --plan gbs=8,mb=4 --steps 4 --seed 3 --timeout 20 --checkpoint-every 0)
hash_of() { grep -h '"type":"final"' "$1" | sed 's/.*"combined_xxh3_64":"\([0-9a-f]*\)".*/\1/' | head -1; }

# The local reference: two processes under the supervisor.
"$bin" "${args[@]}" --nproc 2 --run-dir "$work/ref" > "$work/ref.log" 2>&1 || { cat "$work/ref.log"; exit 1; }
want="$(hash_of "$work/ref/rank-0.jsonl")"

env -u GLOO_SOCKET_IFNAME PARLAB_HOST_ID=host-b RANK=1 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=10.213.0.1 MASTER_PORT=29531 \
  ip netns exec "$b" timeout 90 "$bin" "${args[@]}" --run-dir "$work/two" > "$work/r1.log" 2>&1 &
r1=$!
env -u GLOO_SOCKET_IFNAME PARLAB_HOST_ID=host-a RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=10.213.0.1 MASTER_PORT=29531 \
  ip netns exec "$a" timeout 90 "$bin" "${args[@]}" --run-dir "$work/two" > "$work/r0.log" 2>&1
s0=$?
wait "$r1"; s1=$?
if [ "$s0" != 0 ] || [ "$s1" != 0 ]; then
  echo "FAIL: ranks exited $s0 and $s1"; echo "--- rank 0"; cat "$work/r0.log"; echo "--- rank 1"; cat "$work/r1.log"; exit 1
fi
got0="$(hash_of "$work/two/rank-0.jsonl")"  # rank 0 reports the job's final state
grep -h "Gloo uses interface" "$work/r0.log" "$work/r1.log"
grep -q '"comms":{"world":"gloo"}' "$work/two/rank-0.jsonl" || { echo "FAIL: the two hosts did not meet over Gloo"; exit 1; }
echo "final state hash: local reference $want, two namespaces $got0"
[ -n "$want" ] && [ "$got0" = "$want" ] || { echo "FAIL: final state hashes differ"; exit 1; }
echo PASS
