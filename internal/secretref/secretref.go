// Package secretref resolves the references TMS takes instead of secrets:
// env:NAME or file:PATH, on the command line and in the config file, so
// that a secret never appears in an argument list, a config file or a log.
package secretref

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// Check refuses a value that is not a reference, with the error Resolve
// gives for it; it reads nothing, so a missing variable or file is no
// error here.
func Check(ref string) error {
	if strings.HasPrefix(ref, "env:") || strings.HasPrefix(ref, "file:") {
		return nil
	}
	return errors.New("the value must be a reference, env:NAME or file:PATH, never the secret itself")
}

// Resolve reads a secret reference: env:NAME (the variable's value)
// or file:PATH (the file's content without its trailing line break). A
// value that is neither is refused, so a secret never lands on a command
// line or in a config file by mistake. An empty resolved value is refused
// too: an empty token would accept an empty bearer.
func Resolve(ref string) (string, error) {
	var v string
	switch {
	case strings.HasPrefix(ref, "env:"):
		name := strings.TrimPrefix(ref, "env:")
		var ok bool
		if v, ok = os.LookupEnv(name); !ok {
			return "", fmt.Errorf("environment variable %s is not set", name)
		}
	case strings.HasPrefix(ref, "file:"):
		b, err := os.ReadFile(strings.TrimPrefix(ref, "file:"))
		if err != nil {
			return "", err
		}
		v = strings.TrimRight(string(b), "\r\n")
	default:
		return "", Check(ref)
	}
	if v == "" {
		return "", fmt.Errorf("secret %s is empty", ref)
	}
	return v, nil
}
