# A Spark driver that runs tms-runner (docs/command-submitter.md, spark-submit example). Not run by TMS's
# tests: no Spark here. tms-runner is one Go process; Spark only places and tracks it (cluster mode puts the
# driver on the cluster), so no executors are asked for. The exit code is the runner's.
import os
import sys

runner = os.environ.get("TMS_RUNNER", "/opt/tms/tms-runner")
os.execv(runner, [runner] + sys.argv[1:])
