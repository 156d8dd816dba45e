package invalid_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tms-dev/tms/internal/invalid"
)

func TestFamily(t *testing.T) {
	t.Parallel()
	a, b := invalid.New("invalid argument"), invalid.New("invalid policy")
	err := fmt.Errorf("%w: field x must be positive", a)
	require.ErrorIs(t, err, a)
	require.ErrorIs(t, err, invalid.ErrArgument, "a package's sentinel is an invalid argument")
	require.NotErrorIs(t, err, b, "and not another package's")
	require.Equal(t, "invalid argument: field x must be positive", err.Error())
	require.NotErrorIs(t, errors.New("invalid argument"), invalid.ErrArgument, "the message alone does not match")
}
