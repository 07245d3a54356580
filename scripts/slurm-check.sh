#!/usr/bin/env bash
# Launched as users launch: stands up a real single-host Slurm (Debian slurm-wlm + munge), runs a
# 2-task `srun parlab train` job with no MASTER_ADDR/MASTER_PORT (the ranks derive them from the
# step's node list and the job id, as PyTorch Lightning does), and checks that the job ends on
# the same final state hash as a local 2-process run of the same job.
# Needs root (it installs packages and starts slurmctld, slurmd and munged); skips (exit 77)
# saying why otherwise. Stops the daemons it started on exit.
#   scripts/slurm-check.sh [PARLAB_BIN]      (default: build/cli/parlab)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$(realpath "${1:-$root/build/cli/parlab}")"
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root to install slurm-wlm and munge and start their daemons"
[ -x "$bin" ] || { echo "no parlab binary at $bin (build it, or pass its path)"; exit 2; }

if ! command -v srun >/dev/null || ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  echo "== installing slurm-wlm and munge"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || skip "apt-get update failed (no network?)"
  apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null || skip "cannot install slurm-wlm"
fi

work="$(mktemp -d)"
started=()
cleanup() {
  scontrol shutdown >/dev/null 2>&1 || true  # slurmctld and slurmd
  for p in "${started[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

echo "== munge"
mkdir -p /etc/munge /run/munge /var/lib/munge /var/log/munge
[ -s /etc/munge/munge.key ] || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge
chmod 0700 /etc/munge && chmod 0400 /etc/munge/munge.key
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  runuser -u munge -- /usr/sbin/munged --force
  sleep 1
  started+=("$(cat /run/munge/munged.pid)")  # stopped again on exit
fi
munge -n | unmunge >/dev/null || { echo "munge does not work"; exit 1; }

echo "== slurm (one node: this host)"
host="$(hostname -s)"
mkdir -p /etc/slurm /var/spool/slurmd /var/spool/slurmctld /var/log/slurm
# slurmd -C prints this host as a NodeName line (CPUs, sockets, memory).
node="$(slurmd -C | head -1)"
cat > /etc/slurm/slurm.conf <<EOF
ClusterName=parlabcheck
SlurmctldHost=$host
AuthType=auth/munge
SlurmUser=root
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmdSpoolDir=/var/spool/slurmd
StateSaveLocation=/var/spool/slurmctld
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
$node State=UNKNOWN
PartitionName=check Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
EOF
slurmctld -i && slurmd || { tail -20 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log; exit 1; }
for _ in $(seq 60); do
  sinfo -h -o %T 2>/dev/null | grep -Eq '^(idle|mixed)' && break
  scontrol update nodename="$host" state=resume >/dev/null 2>&1 || true
  sleep 1
done
sinfo

echo "== the job"
cat > "$work/tiny.toml" <<'EOF'
name = "tiny"
kind = "mlp"
layers = 2
hidden = 32
ffn = 64
classes = 4
microbatch = 4
precision = "fp32"
EOF
args=(train --model "$work/tiny.toml" --plan gbs=8,mb=4 --steps 4 --seed 3 --timeout 20 --checkpoint-every 0)
hash_of() { grep -h '"type":"final"' "$1" | sed 's/.*"combined_xxh3_64":"\([0-9a-f]*\)".*/\1/' | head -1; }

# The local reference: two processes under parlab's own supervisor.
"$bin" "${args[@]}" --nproc 2 --run-dir "$work/ref" > "$work/ref.log" 2>&1 || { cat "$work/ref.log"; exit 1; }
want="$(hash_of "$work/ref/rank-0.jsonl")"

# srun: two tasks, nothing but what Slurm sets (no MASTER_ADDR, MASTER_PORT or token).
env -u MASTER_ADDR -u MASTER_PORT -u RANK -u WORLD_SIZE -u PARLAB_STORE_TOKEN \
  timeout 300 srun -N 1 -n 2 --overcommit "$bin" "${args[@]}" --run-dir "$work/srun" > "$work/srun.log" 2>&1 ||
  { echo "FAIL: the srun job failed"; cat "$work/srun.log"; exit 1; }
cat "$work/srun.log" | grep -E '^(Launch|groups)' || true
grep -q "MASTER_ADDR from SLURM_STEP_NODELIST" "$work/srun.log" ||
  { echo "FAIL: the job did not say it derived its rendezvous from the Slurm step"; cat "$work/srun.log"; exit 1; }
got="$(hash_of "$work/srun/rank-0.jsonl")"
echo "final state hash: local 2-process run $want, srun job $got"
[ -n "$want" ] && [ "$got" = "$want" ] || { echo "FAIL: final state hashes differ"; exit 1; }
echo PASS
