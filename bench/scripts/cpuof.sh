#!/usr/bin/env bash
# cpuof.sh N CMD...: runs CMD and prints the CPU time, per unit of N, of
# the PostgreSQL server (every postgres process on this machine, the
# backends that exited meanwhile included: the postmaster's children's
# time) and of CMD itself (the engine or the peer, with its workers).
# Run it on a quiet machine, with the server on it.
#
#   bench/scripts/cpuof.sh 40000 /tmp/bench -engines heph -workloads jobs -backends postgres -rounds 1 -raw 0 -jobs 40000
set -euo pipefail
n=$1
shift
server_ticks() {
	local f s sum=0
	for f in /proc/[0-9]*/stat; do
		s=$(cat "$f" 2>/dev/null) || continue
		[[ $s == *"(postgres)"* ]] || continue
		# utime, stime, cutime, cstime: fields 14-17 of stat, 12-15 after "pid (comm) ".
		set -- ${s##*) }
		sum=$((sum + ${12} + ${13} + ${14} + ${15}))
	done
	echo "$sum"
}
tick_us=$((1000000 / $(getconf CLK_TCK)))
before=$(server_ticks)
t=$(mktemp)
/usr/bin/time -f "%U %S" -o "$t" "$@" >"${CPUOF_OUT:-/dev/null}" 2>&1
after=$(server_ticks)
read -r u s <"$t"
rm -f "$t"
echo "server CPU µs per unit: $(((after - before) * tick_us / n))"
echo "command CPU µs per unit: $(python3 -c "print(int(($u + $s) * 1e6 / $n))")"
