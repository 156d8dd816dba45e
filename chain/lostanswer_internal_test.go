package chain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"syscall"
	"testing"

	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"
)

func TestRetryable(t *testing.T) {
	t.Parallel()
	post := func(err error) error {
		return &url.Error{Op: "Post", URL: "http://catalog/v1/namespaces/ns/tables/t", Err: err}
	}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("commit: %w", rest.ErrCommitStateUnknown), true},
		{rest.ErrServiceUnavailable, true},
		{rest.ErrServerError, true},
		{post(io.EOF), true},
		{post(io.ErrUnexpectedEOF), true},
		{post(syscall.ECONNRESET), true},
		{post(syscall.ECONNREFUSED), true},
		{rest.ErrCommitFailed, false}, // a conflict: the loop's own case
		{table.ErrCommitFailed, false},
		{rest.ErrBadRequest, false},
		{rest.ErrForbidden, false},
		{post(context.Canceled), false},
		{post(context.DeadlineExceeded), false},
		{errors.New("requirement failed: branch main has changed"), false},
	} {
		require.Equal(t, c.want, retryable(c.err), "%v", c.err)
	}
}
