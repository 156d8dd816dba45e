#!/bin/sh
# Called as: k8s-cancel.sh {{external_id}}. Suspends the Job: Kubernetes terminates its pod (SIGTERM, then
# SIGKILL after terminationGracePeriodSeconds), the runner closes its row cancelled, and the Job keeps a
# Suspended condition for k8s-status.sh to report.
set -eu
NS=${TMS_K8S_NAMESPACE:-tms}
kubectl -n "$NS" patch job "$1" --type=merge -p '{"spec":{"suspend":true}}' >/dev/null
