#!/bin/sh
# TMS command submitter → Kubernetes Job (docs/command-submitter.md). Not run by TMS's tests: no cluster here.
# Called as: k8s-submit.sh {{job_id}} {{fence}}
# Creates the Job from tms-runner-job.yaml and prints its name. Credentials are NOT taken from this
# script's environment: the Job reads them from the Secret tms-runner (see the manifest).
set -eu
NS=${TMS_K8S_NAMESPACE:-tms}
name="tms-job-$1-$2"
sed -e "s/__NAME__/$name/g" -e "s/__JOB_ID__/$1/g" -e "s/__FENCE__/$2/g" \
  "$(dirname "$0")/tms-runner-job.yaml" | kubectl -n "$NS" create -f - >/dev/null
echo "$name"
