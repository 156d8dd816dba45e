package flow

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMergeJobOptions: a commit chain's jobOptions keep the largest amount
// of a key both types set (numbers with numbers, sizes with sizes), the
// first value otherwise.
func TestMergeJobOptions(t *testing.T) {
	dst := map[string]string{}
	mergeJobOptions(dst, map[string]string{"spark.executor.memory": "4g", "spark.executor.cores": "2", "queue": "etl", "mix": "2"})
	mergeJobOptions(dst, map[string]string{"spark.executor.memory": "8192M", "spark.executor.cores": "1", "queue": "adhoc",
		"mix": "1g", "spark.driver.memory": "1g"})
	mergeJobOptions(dst, map[string]string{"spark.executor.memory": "6g", "spark.executor.cores": "4"})
	require.Equal(t, map[string]string{
		"spark.executor.memory": "8192M", // 8 GiB > 6g > 4g
		"spark.executor.cores":  "4",
		"queue":                 "etl", // not an amount: the first
		"mix":                   "2",   // a number and a size do not compare
		"spark.driver.memory":   "1g",
	}, dst)
}
