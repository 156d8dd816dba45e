package policy

import (
	"encoding/json"
	"slices"
	"strings"
)

// credentialWords are the parts of a key that mark it as a credential. Keys
// are compared lower-cased with '-', '_', '.' and spaces removed, so
// access-key, access_key, accessKey and ACCESS.KEY all match "accesskey".
// Matching parts of words on purpose: s3.secret-access-key,
// adls.sas-token.x, client-secret and oauth2 token endpoints' "token"
// settings are all refused.
var credentialWords = []string{
	"password", "passwd", "passphrase", "secret", "token", "credential", "keytab",
	"accesskey", "secretkey", "privatekey", "apikey", "sessionkey", "signingkey", "saskey",
}

// CredentialWord returns the credential word key contains, or "".
func CredentialWord(key string) string {
	norm := strings.Map(func(r rune) rune {
		switch r {
		case '-', '_', '.', ' ':
			return -1
		}
		return r
	}, strings.ToLower(key))
	for _, w := range credentialWords {
		if strings.Contains(norm, w) {
			return w
		}
	}
	return ""
}

// IsCredentialKey reports whether a property or option key looks like it
// holds a credential: the one rule for policies, job specs and catalog
// properties. Such values reach a job through the environment or a props
// file, never through a policy, a spec or the ledger.
func IsCredentialKey(key string) bool { return CredentialWord(key) != "" }

// checkCredentialKeys refuses credential-shaped keys in the JSON object raw
// (jobOptions or rewriteOptions), naming the first by sorted key. A raw
// that is not an object is left to the caller's own check.
func checkCredentialKeys(field string, raw json.RawMessage) error {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if w := CredentialWord(k); w != "" {
			return errf(field+"."+k, "looks like a credential (%q); policies must not hold credentials: configure them in the coordinator (gravitinoAuth.*, ircAuth.*)", w)
		}
	}
	return nil
}
