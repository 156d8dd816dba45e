#!/bin/sh
# Called as: systemd-status.sh {{external_id}} (a unit name such as tms-job-7-1.service). Not run by TMS's
# tests. Exits 1 for a unit systemd does not know.
set -u
state=$(systemctl show -p LoadState,ActiveState,Result --value "$1") || exit 1
set -- $state   # LoadState ActiveState Result
[ "$1" = not-found ] && exit 1
case "$2" in
  active|activating|deactivating|reloading) echo running ;;
  failed) echo failed ;;
  inactive) if [ "$3" = success ]; then echo succeeded; else echo failed; fi ;;
  *) echo queued ;;
esac
