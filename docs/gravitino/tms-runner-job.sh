#!/bin/sh
# Gravitino shell job template executable for TMS (docs/gravitino/README.md).
# Called as: tms-runner-job.sh JOB_ID FENCE LEDGER_URL
# The ledger URL has no password: PostgreSQL's PGPASSWORD or PGPASSFILE in
# this job's environment supplies it. TMS_CATALOG_SECRET_REFS (references,
# never secrets) is resolved by the runner on this host.
set -eu
RUNNER=${TMS_RUNNER:-/usr/local/bin/tms-runner}
exec "$RUNNER" run --job-id "$1" --fence "$2" --db "$3"
