#!/usr/bin/env bash
# walof.sh N CMD...: runs CMD and prints the WAL it caused, per unit of N
# (a job, a run), by record type (pg_waldump --stats=record). Run it on a
# quiet server: the WAL position is the cluster's, so anything else
# writing counts too. The server must keep the range's WAL segments: set
# wal_keep_size (ALTER SYSTEM SET wal_keep_size = '6GB'; SELECT
# pg_reload_conf()) for runs that write more than max_wal_size.
#
#   bench/scripts/walof.sh 20000 go run ./bench -engines river -workloads jobs -backends postgres -rounds 1 -raw 0 -jobs 20000
set -euo pipefail
n=$1
shift
PSQL=(psql -h "${PGHOST:-127.0.0.1}" -U "${PGUSER:-postgres}" -Atc)
from=$("${PSQL[@]}" "SELECT pg_current_wal_lsn()")
"$@" >"${WALOF_OUT:-/dev/null}" 2>&1
to=$("${PSQL[@]}" "SELECT pg_current_wal_lsn()")
echo "WAL bytes per unit: $("${PSQL[@]}" "SELECT (pg_wal_lsn_diff('$to', '$from') / $n)::int")"
dump=$(ls /usr/lib/postgresql/*/bin/pg_waldump | sort -V | tail -n 1)
"$dump" --stats=record -p "$("${PSQL[@]}" "SHOW data_directory")/pg_wal" -s "$from" -e "$to" | python3 -c '
import re, sys
n = float(sys.argv[1])
for line in sys.stdin:
    m = re.match(r"^(\S+)\s+(\d+)\s+\(\s*[\d.]+\)\s+(\d+)\s+\(\s*[\d.]+\)\s+(\d+)", line)
    if m and m.group(2) != "0":
        print("%-28s %7.2f records %8.1f bytes %8.1f FPI bytes" % (m.group(1), int(m.group(2)) / n, int(m.group(3)) / n, int(m.group(4)) / n))
' "$n"
