#!/bin/sh
# Called as: k8s-status.sh {{external_id}}. Prints queued|running|succeeded|failed|cancelled; exits 1 for
# a Job the cluster does not have (deleted, or garbage-collected after ttlSecondsAfterFinished).
set -u
NS=${TMS_K8S_NAMESPACE:-tms}
out=$(kubectl -n "$NS" get job "$1" -o jsonpath='{range .status.conditions[?(@.status=="True")]}{.type}{" "}{end}|{.status.active}') || exit 1
conds=${out%|*} active=${out#*|}
case " $conds " in
  *" Complete "*) echo succeeded ;;
  *" Failed "*) echo failed ;;
  *" Suspended "*) echo cancelled ;;
  *) if [ -n "$active" ] && [ "$active" != 0 ]; then echo running; else echo queued; fi ;;
esac
