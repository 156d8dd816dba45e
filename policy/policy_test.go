package policy_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/policy"
)

// requireFieldError checks that err is a *policy.Error on field,
// found by errors.Is as policy.ErrInvalid, with the field first in its
// message.
func requireFieldError(t *testing.T, err error, field string, msgAndArgs ...any) *policy.Error {
	t.Helper()
	require.Error(t, err, msgAndArgs...)
	var pe *policy.Error
	require.True(t, errors.As(err, &pe), "want a *policy.Error, got %T: %v", err, err)
	require.Equal(t, field, pe.Field, msgAndArgs...)
	require.ErrorIs(t, err, policy.ErrInvalid)
	require.True(t, strings.HasPrefix(err.Error(), field+": "), "message %q starts with the field", err.Error())
	return pe
}

func content(t *testing.T, typ policy.Type, doc string) (policy.Content, error) {
	t.Helper()
	return policy.ParseContent(typ, json.RawMessage(doc))
}

func TestParsePolicyContent(t *testing.T) {
	t.Parallel()
	c, err := content(t, policy.Compaction, `{
		"schedule": {"onCommit": true, "crontab": "0 3 * * *", "timezone": "Europe/Berlin"},
		"minIntervalMs": 600000,
		"jobOptions": {"spark.executor.instances": 4, "spark.executor.memory": "8g", "dynamic": true, "catalog.uri": "https://catalog:8181"},
		"minDataFileMse": 1000, "maxPartitionNum": 10,
		"rewriteOptions": {"target-file-size-bytes": "134217728"}
	}`)
	require.NoError(t, err)
	require.Equal(t, policy.Compaction, c.Type)
	require.True(t, c.Schedule.OnCommit)
	require.Equal(t, "0 3 * * *", c.Schedule.Crontab)
	require.Equal(t, "Europe/Berlin", c.Schedule.Timezone)
	// 03:00 Berlin is 02:00 UTC in winter: the time zone reached the crontab.
	require.Equal(t, time.Date(2031, 1, 10, 2, 0, 0, 0, time.UTC),
		c.Schedule.Cron.Next(time.Date(2031, 1, 9, 12, 0, 0, 0, time.UTC)).UTC())
	require.NotNil(t, c.MinInterval)
	require.Equal(t, 10*time.Minute, *c.MinInterval)
	require.Equal(t, map[string]string{
		"spark.executor.instances": "4", "spark.executor.memory": "8g", "dynamic": "true", "catalog.uri": "https://catalog:8181",
	}, c.JobOptions)

	// onCommit alone: no cron, no cooldown override, no job options.
	c, err = content(t, policy.SnapshotExpiry, `{"schedule": {"onCommit": true}}`)
	require.NoError(t, err)
	require.Nil(t, c.Schedule.Cron)
	require.Nil(t, c.MinInterval, "absent minIntervalMs leaves the configured default")
	require.NotNil(t, c.JobOptions)
	require.Empty(t, c.JobOptions)

	// minIntervalMs 0 disables the cooldown; Gravitino-style strings work.
	c, err = content(t, policy.Compaction, `{"schedule": {"onCommit": true}, "minIntervalMs": 0}`)
	require.NoError(t, err)
	require.NotNil(t, c.MinInterval)
	require.Zero(t, *c.MinInterval)
	c, err = content(t, policy.Compaction, `{"schedule": {"onCommit": true}, "minIntervalMs": "60000"}`)
	require.NoError(t, err)
	require.Equal(t, time.Minute, *c.MinInterval)
}

func TestPolicyCrontab(t *testing.T) {
	t.Parallel()
	from := time.Date(2031, 1, 1, 10, 20, 3, 0, time.UTC)
	for spec, next := range map[string]time.Time{
		"*/15 * * * *":   time.Date(2031, 1, 1, 10, 30, 0, 0, time.UTC),
		"@hourly":        time.Date(2031, 1, 1, 11, 0, 0, 0, time.UTC),
		"@daily":         time.Date(2031, 1, 2, 0, 0, 0, 0, time.UTC),
		"@every 30s":     from.Add(30 * time.Second),
		"*/1 * * * * *":  from.Add(time.Second),
		"0 0 12 1 1 *":   time.Date(2031, 1, 1, 12, 0, 0, 0, time.UTC),
		"  0 11 * * *  ": time.Date(2031, 1, 1, 11, 0, 0, 0, time.UTC),
	} {
		c, err := content(t, policy.OrphanCleanup, `{"schedule": {"crontab": "`+spec+`"}}`)
		require.NoError(t, err, spec)
		require.Equal(t, next, c.Schedule.Cron.Next(from).UTC(), spec)
	}
	for _, spec := range []string{"61 * * * *", "* * *", "@fortnightly", "CRON_TZ=UTC 0 3 * * *", "every hour"} {
		_, err := content(t, policy.Compaction, `{"schedule": {"crontab": "`+spec+`"}}`)
		requireFieldError(t, err, "content.schedule.crontab", spec)
		require.ErrorContains(t, err, "five fields")
	}
}

func TestPolicyScheduleErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, doc, field, msg string
		typ                   policy.Type
	}{
		{"orphan onCommit", `{"schedule": {"onCommit": true, "crontab": "@daily"}}`, "content.schedule.onCommit", "crontab only", policy.OrphanCleanup},
		{"orphan without crontab", `{"schedule": {}}`, "content.schedule.crontab", "required", policy.OrphanCleanup},
		{"no schedule", `{"minIntervalMs": 5}`, "content.schedule", "never runs", policy.Compaction},
		{"no trigger", `{"schedule": {"onCommit": false}}`, "content.schedule", "never runs", policy.ManifestRewrite},
		{"bad time zone", `{"schedule": {"crontab": "@daily", "timezone": "Mars/Olympus"}}`, "content.schedule.timezone", "Mars/Olympus", policy.Compaction},
		{"local time zone", `{"schedule": {"crontab": "@daily", "timezone": "Local"}}`, "content.schedule.timezone", "IANA", policy.Compaction},
		{"onCommit not a bool", `{"schedule": {"onCommit": "yes"}}`, "content.schedule.onCommit", "bool", policy.Compaction},
		{"unknown schedule field", `{"schedule": {"onCommit": true, "cron": "@daily"}}`, "content.schedule.cron", "unknown field", policy.Compaction},
		{"schedule not an object", `{"schedule": "@daily"}`, "content.schedule", "want", policy.Compaction},
		{"negative interval", `{"schedule": {"onCommit": true}, "minIntervalMs": -1}`, "content.minIntervalMs", ">= 0", policy.Compaction},
		{"fractional interval", `{"schedule": {"onCommit": true}, "minIntervalMs": 1.5}`, "content.minIntervalMs", "whole number", policy.Compaction},
		{"huge interval", `{"schedule": {"onCommit": true}, "minIntervalMs": 1e300}`, "content.minIntervalMs", "whole number", policy.Compaction},
		{"text interval", `{"schedule": {"onCommit": true}, "minIntervalMs": "soon"}`, "content.minIntervalMs", "whole number", policy.Compaction},
		{"not an object", `[1, 2]`, "content", "JSON object", policy.Compaction},
		{"empty", ``, "content", "required", policy.Compaction},
		{"jobOptions nested", `{"schedule": {"onCommit": true}, "jobOptions": {"spark": {"x": 1}}}`, "content.jobOptions.spark", "string, number or boolean", policy.Compaction},
		{"jobOptions array", `{"schedule": {"onCommit": true}, "jobOptions": ["a"]}`, "content.jobOptions", "JSON object", policy.Compaction},
		// Thresholds are chain's; their errors come back under content.
		{"threshold range", `{"schedule": {"onCommit": true}, "maxPartitionNum": 0}`, "content.maxPartitionNum", "positive", policy.Compaction},
		{"rewrite option range", `{"schedule": {"onCommit": true}, "rewriteOptions": {"target-file-size-bytes": -1}}`, "content.rewriteOptions.target-file-size-bytes", "positive", policy.Compaction},
		{"orphan age floor", `{"schedule": {"crontab": "@daily"}, "olderThan": "5m"}`, "content.olderThan", "at least", policy.OrphanCleanup},
		{"unknown threshold", `{"schedule": {"onCommit": true}, "minDataFileMSE": 1}`, "content.minDataFileMSE", "unknown option", policy.Compaction},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := content(t, tc.typ, tc.doc)
			requireFieldError(t, err, tc.field)
			require.ErrorContains(t, err, tc.msg)
		})
	}
}

func TestPolicyRefusesCredentials(t *testing.T) {
	t.Parallel()
	for _, key := range []string{
		"password", "s3.Password", "jdbc.passwd", "ssl.key-passphrase", "client-secret", "CLIENT_SECRET",
		"token", "adls.sas-token.account", "credential", "gcs.oauth2.credentials", "keytab", "kerberos.keytab.path",
		"access-key", "access_key", "accessKey", "s3.access-key-id", "s3.secret-access-key", "secret-key",
		"private-key", "privateKey", "api_key", "x-api-key", "signing-key", "session_key",
	} {
		secret := `"hunter2-do-not-echo"`
		for _, in := range []string{"jobOptions", "rewriteOptions"} {
			doc := `{"schedule": {"onCommit": true}, "` + in + `": {"spark.executor.instances": 2, "` + key + `": ` + secret + `}}`
			if in == "rewriteOptions" {
				doc = `{"schedule": {"onCommit": true}, "rewriteOptions": {"` + key + `": ` + secret + `}}`
			}
			_, err := content(t, policy.Compaction, doc)
			pe := requireFieldError(t, err, "content."+in+"."+key, key)
			require.Contains(t, pe.Msg, "credential")
			require.NotContains(t, err.Error(), "hunter2", "the value is never echoed")
		}
	}

	_, err := content(t, policy.Compaction, `{"schedule": {"onCommit": true}, "jobOptions": {"catalog.uri": "https://admin:hunter2@catalog:8181"}}`)
	requireFieldError(t, err, "content.jobOptions.catalog.uri")
	require.NotContains(t, err.Error(), "hunter2")

	// Ordinary job properties pass.
	c, err := content(t, policy.Compaction, `{"schedule": {"onCommit": true}, "jobOptions": {
		"spark.executor.memory": "4g", "s3.endpoint": "http://minio:9000", "client.region": "eu-west-1",
		"warehouse": "s3://lake/wh", "catalog.uri": "https://user@catalog:8181", "monkey.business": "ok"}}`)
	require.NoError(t, err)
	require.Len(t, c.JobOptions, 6)
}

func TestPolicyTypes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, policyType string
		typ            policy.Type
	}{
		{"system_iceberg_compaction", "system_iceberg_compaction", policy.Compaction},
		{"compaction", "system_iceberg_compaction", policy.Compaction},
		{"SYSTEM_ICEBERG_REWRITE_MANIFESTS", "system_iceberg_rewrite_manifests", policy.ManifestRewrite},
		{"manifest-rewrite", "system_iceberg_rewrite_manifests", policy.ManifestRewrite},
		{"system_iceberg_snapshot_expiration", "system_iceberg_snapshot_expiration", policy.SnapshotExpiry},
		{" snapshot-expiry ", "system_iceberg_snapshot_expiration", policy.SnapshotExpiry},
		{"system_iceberg_orphan_file_removal", "system_iceberg_orphan_file_removal", policy.OrphanCleanup},
		{"orphan-cleanup", "system_iceberg_orphan_file_removal", policy.OrphanCleanup},
	} {
		pt, typ, err := policy.ParsePolicyType(tc.in)
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.policyType, pt)
		require.Equal(t, tc.typ, typ)
		require.Equal(t, tc.policyType, policy.PolicyTypeOf(typ))
		back, ok := policy.MaintenanceTypeOf(pt)
		require.True(t, ok)
		require.Equal(t, typ, back)
	}
	_, _, err := policy.ParsePolicyType("system_iceberg_vacuum")
	requireFieldError(t, err, "policyType")
	for _, valid := range []string{"system_iceberg_compaction", "system_iceberg_rewrite_manifests", "system_iceberg_snapshot_expiration", "system_iceberg_orphan_file_removal"} {
		require.ErrorContains(t, err, valid, "the error lists the valid types")
	}
	_, ok := policy.MaintenanceTypeOf("compaction")
	require.False(t, ok, "stored types are Gravitino's names, no aliases")
	require.Equal(t, time.Hour, policy.DefaultMinInterval(policy.Compaction))
	require.Equal(t, 24*time.Hour, policy.DefaultMinInterval(policy.OrphanCleanup))
}

func TestDecodePolicy(t *testing.T) {
	t.Parallel()
	spec, c, err := policy.Decode(strings.NewReader(`{
		"name": "nightly_compaction", "comment": "small files", "policyType": "compaction",
		"content": {"schedule": {"crontab": "@daily"}}}`))
	require.NoError(t, err)
	require.Equal(t, "nightly_compaction", spec.Name)
	require.Equal(t, "small files", spec.Comment)
	require.Equal(t, "system_iceberg_compaction", spec.PolicyType, "normalised to Gravitino's name")
	require.NotNil(t, spec.Enabled)
	require.True(t, *spec.Enabled, "enabled by default")
	require.Equal(t, "@daily", c.Schedule.Crontab)

	spec, _, err = policy.Decode(strings.NewReader(`{"name": "off", "policyType": "system_iceberg_snapshot_expiration", "enabled": false,
		"content": {"schedule": {"onCommit": true}}}`))
	require.NoError(t, err)
	require.False(t, *spec.Enabled)

	for _, tc := range []struct{ doc, field, msg string }{
		{`{"name": "x", "policyType": "compaction", "content": {"schedule": {"onCommit": true}}, "owner": "me"}`, "owner", "unknown field"},
		{`{"name": "x", "policyType": "compaction", "enabled": "yes", "content": {}}`, "enabled", "bool"},
		{`{"name": "", "policyType": "compaction", "content": {}}`, "name", "required"},
		{`{"name": "has space", "policyType": "compaction", "content": {}}`, "name", "letters"},
		{`{"name": "-x", "policyType": "compaction", "content": {}}`, "name", "letters"},
		{`{"name": "x", "policyType": "vacuum", "content": {}}`, "policyType", "vacuum"},
		{`{"name": "x", "policyType": "orphan-cleanup", "content": {"schedule": {"onCommit": true, "crontab": "@daily"}}}`, "content.schedule.onCommit", "crontab only"},
		{`{"name": "x", "policyType": "compaction"}`, "content", "required"},
		{`{"name": "x"`, "policy", "JSON"},
		{`{"name": "x", "policyType": "compaction", "content": {"schedule": {"onCommit": true}}} {}`, "policy", "trailing"},
	} {
		_, _, err := policy.Decode(strings.NewReader(tc.doc))
		requireFieldError(t, err, tc.field, tc.doc)
		require.ErrorContains(t, err, tc.msg, tc.doc)
	}
}

// FuzzParsePolicyContent checks that no content makes validation panic and
// that every refusal names a field under content.
func FuzzParsePolicyContent(f *testing.F) {
	for _, seed := range []string{
		`{"schedule": {"onCommit": true, "crontab": "0 3 * * *", "timezone": "UTC"}, "minIntervalMs": 0}`,
		`{"schedule": {"crontab": "@every 30s"}, "jobOptions": {"a": 1, "password": "x"}}`,
		`{"schedule": {"onCommit": true}, "rewriteOptions": {"target-file-size-bytes": "1"}}`,
		`{"schedule": null}`, `[]`, `null`, `{"schedule": {"crontab": "* * * * * * *"}}`,
	} {
		f.Add(seed, 0)
	}
	types := []policy.Type{policy.Compaction, policy.ManifestRewrite, policy.SnapshotExpiry, policy.OrphanCleanup}
	f.Fuzz(func(t *testing.T, doc string, typ int) {
		tp := types[(typ%len(types)+len(types))%len(types)]
		c, err := policy.ParseContent(tp, json.RawMessage(doc))
		if err != nil {
			var pe *policy.Error
			if !errors.As(err, &pe) || !strings.HasPrefix(pe.Field, "content") {
				t.Fatalf("error %v (%T) names no content field", err, err)
			}
			return
		}
		if !c.Schedule.OnCommit && c.Schedule.Cron == nil {
			t.Fatalf("accepted %q without a trigger", doc)
		}
		if tp == policy.OrphanCleanup && c.Schedule.OnCommit {
			t.Fatalf("accepted onCommit for orphan-cleanup: %q", doc)
		}
	})
}
